//! Which ranks share a host, and how they are grouped into supernodes.
//!
//! Two processes can map each other's memory when they run under the same kernel: same
//! hostname *and* same boot id (hostnames alone repeat across containers and reboots). Each
//! rank computes [`host_id`], the conduit exchanges the strings through bootstrap, and
//! [`Supernodes::group`] turns them into supernodes.
#![deny(unsafe_code)]

use std::collections::HashMap;

use crate::error::HostError;

/// The kernel's random boot id, unique per boot.
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// This host's identity: `"<hostname>/<boot id>"`.
pub fn host_id() -> Result<String, HostError> {
    let name = nix::unistd::gethostname().map_err(|e| HostError::Hostname(e.to_string()))?;
    let name = name
        .into_string()
        .map_err(|n| HostError::Hostname(format!("hostname {n:?} is not UTF-8")))?;
    let boot = read_boot_id(BOOT_ID_PATH)?;
    Ok(format!("{name}/{boot}"))
}

pub(crate) fn read_boot_id(path: &str) -> Result<String, HostError> {
    let text = std::fs::read_to_string(path).map_err(|source| HostError::BootId {
        path: path.to_owned(),
        source,
    })?;
    let id = text.trim();
    if id.is_empty() {
        return Err(HostError::EmptyBootId {
            path: path.to_owned(),
        });
    }
    Ok(id.to_owned())
}

/// A partition of a job's ranks into supernodes: groups of ranks on one host that share
/// memory. Groups are ordered by their lowest rank; ranks inside a group ascend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supernodes {
    groups: Vec<Vec<u32>>,
    /// Group index of each rank.
    of_rank: Vec<usize>,
}

impl Supernodes {
    /// Groups ranks `0..hosts.len()` (rank `r` runs on host `hosts[r]`) with
    /// `GASNET_SUPERNODE_MAXSIZE` semantics: `max_size` 0 puts every rank of a host in one
    /// supernode, 1 puts every rank alone (PSHM off), `k` splits each host's ranks, in rank
    /// order, into consecutive groups of at most `k`.
    pub fn group<S: AsRef<str>>(hosts: &[S], max_size: usize) -> Supernodes {
        let mut by_host: HashMap<&str, Vec<u32>> = HashMap::new();
        let mut host_order: Vec<&str> = Vec::new();
        for (rank, host) in hosts.iter().enumerate() {
            let host = host.as_ref();
            by_host
                .entry(host)
                .or_insert_with(|| {
                    host_order.push(host);
                    Vec::new()
                })
                .push(rank as u32);
        }
        let mut groups: Vec<Vec<u32>> = Vec::new();
        for host in host_order {
            let ranks = by_host.remove(host).unwrap_or_default();
            let size = if max_size == 0 {
                ranks.len().max(1)
            } else {
                max_size
            };
            groups.extend(ranks.chunks(size).map(<[u32]>::to_vec));
        }
        groups.sort_by_key(|g| g.first().copied());
        let mut of_rank = vec![0; hosts.len()];
        for (i, g) in groups.iter().enumerate() {
            for &r in g {
                of_rank[r as usize] = i;
            }
        }
        Supernodes { groups, of_rank }
    }

    /// All supernodes.
    pub fn groups(&self) -> &[Vec<u32>] {
        &self.groups
    }

    /// The members of `rank`'s supernode (including `rank`), or `None` for an unknown rank.
    pub fn members_of(&self, rank: u32) -> Option<&[u32]> {
        let g = *self.of_rank.get(rank as usize)?;
        self.groups.get(g).map(Vec::as_slice)
    }

    /// Whether `a` and `b` share memory.
    pub fn same_supernode(&self, a: u32, b: u32) -> bool {
        match (self.of_rank.get(a as usize), self.of_rank.get(b as usize)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(hosts: &[&str], k: usize) -> Vec<Vec<u32>> {
        Supernodes::group(hosts, k).groups().to_vec()
    }

    #[test]
    fn unlimited_groups_each_host() {
        assert_eq!(g(&["a", "a", "a", "a"], 0), vec![vec![0, 1, 2, 3]]);
        assert_eq!(
            g(&["a", "b", "a", "b", "c"], 0),
            vec![vec![0, 2], vec![1, 3], vec![4]]
        );
        assert_eq!(g(&[], 0), Vec::<Vec<u32>>::new());
    }

    #[test]
    fn one_puts_every_rank_alone() {
        assert_eq!(g(&["a", "a", "a"], 1), vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn k_splits_each_host_in_rank_order() {
        assert_eq!(g(&["a", "a", "a", "a"], 2), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(
            g(&["a", "a", "a", "a", "a"], 2),
            vec![vec![0, 1], vec![2, 3], vec![4]]
        );
        assert_eq!(
            g(&["a", "b", "a", "b", "a", "b"], 2),
            vec![vec![0, 2], vec![1, 3], vec![4], vec![5]]
        );
        assert_eq!(g(&["a", "a", "a"], 7), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn lookups() {
        let s = Supernodes::group(&["a", "b", "a", "a"], 2);
        assert_eq!(s.members_of(3), Some(&[3][..]));
        assert_eq!(s.members_of(2), Some(&[0, 2][..]));
        assert_eq!(s.members_of(4), None);
        assert!(s.same_supernode(0, 2));
        assert!(!s.same_supernode(2, 3));
        assert!(!s.same_supernode(0, 9));
    }

    #[test]
    fn host_id_has_hostname_and_boot_id() {
        let id = host_id().unwrap();
        let (name, boot) = id.split_once('/').unwrap();
        assert!(!name.is_empty());
        assert_eq!(boot, read_boot_id(BOOT_ID_PATH).unwrap());
        assert_eq!(boot.len(), 36, "boot id {boot:?}");
        assert_eq!(id, host_id().unwrap());
    }

    #[test]
    fn boot_id_errors_name_the_file() {
        let e = read_boot_id("/nonexistent/boot_id").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read /nonexistent/boot_id"),
            "{e}"
        );
        let e = read_boot_id("/dev/null").unwrap_err();
        assert_eq!(e.to_string(), "/dev/null is empty");
    }
}
