//! Which jobs of a group are compared with which, the order that keeps them next to each
//! other, and which to run again when a pair ran in two machine states.
//!
//! A ratio to a peer means something only between jobs on the same medium: rgasnet's native
//! (and Portals-library) path against GASNet's network conduits (udp, ibv, and the rgasnet
//! conduit, which compare runs with shared memory off), its shared-memory path against
//! smp-conduit. Such a pair has to run in one machine state (see [`super::probe`]); the other
//! jobs of the group do not. On this project's VM, which changes state every half minute or
//! so, a whole group of testam jobs (about a minute) rarely ran in one state, while a pair run
//! back to back mostly does: so each medium's jobs run as one block, rgasnet's path between
//! its peers, and only a pair that still ran in two states runs again.

use std::collections::BTreeMap;

use super::probe::{self, AroundJob, MachineState};

/// What a job's figures travel over, for pairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Medium {
    /// Between two ranks over a network path (UDP loopback here).
    Network,
    /// Between two ranks through shared memory.
    SharedMemory,
    /// One rank to itself: no peer runs it.
    OneRank,
}

/// A job as pairing sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role {
    /// Its medium.
    pub medium: Medium,
    /// One of GASNet's programs (a peer) rather than one of rgasnet's.
    pub peer: bool,
}

impl Role {
    /// Whether this job's figures are compared with those of `peer`: this is one of
    /// rgasnet's paths, `peer` one of GASNet's, and both on one medium.
    pub fn pairs_with(&self, peer: &Role) -> bool {
        !self.peer && peer.peer && self.medium == peer.medium
    }
}

/// The role of each path and peer by its name (`native`, `gasnet-udp`, ...): how figures are
/// paired once the jobs have run.
pub type Roles = BTreeMap<String, Role>;

/// Whether figures of path `ours` are compared with those of path `peer`, by their `roles`
/// (a name without a role pairs with nothing).
pub fn paired_paths(roles: &Roles, ours: &str, peer: &str) -> bool {
    matches!((roles.get(ours), roles.get(peer)), (Some(a), Some(b)) if a.pairs_with(b))
}

/// compare's paths and peers by name, for tests: rgasnet's native and pshm paths, a one-rank
/// loopback, GASNet's udp and smp conduits.
#[cfg(test)]
pub(crate) fn test_roles() -> Roles {
    let role = |medium, peer| Role { medium, peer };
    [
        ("native", role(Medium::Network, false)),
        ("pshm", role(Medium::SharedMemory, false)),
        ("loopback", role(Medium::OneRank, false)),
        ("gasnet-udp", role(Medium::Network, true)),
        ("gasnet-smp", role(Medium::SharedMemory, true)),
    ]
    .into_iter()
    .map(|(name, r)| (name.to_string(), r))
    .collect()
}

/// The order in which to run a group whose jobs have these `roles` in repeat `run`, as
/// indices into `roles`. The jobs of one medium form a block (the blocks rotate from repeat to
/// repeat); within a block rgasnet's paths run between the peers, whose order rotates too, so
/// that each of rgasnet's jobs runs right next to its peers and no job always runs first.
pub fn arrangement(roles: &[Role], run: usize) -> Vec<usize> {
    let mut media: Vec<Medium> = Vec::new();
    for r in roles {
        if !media.contains(&r.medium) {
            media.push(r.medium);
        }
    }
    if !media.is_empty() {
        let k = run % media.len();
        media.rotate_left(k);
    }
    let mut order = Vec::with_capacity(roles.len());
    for medium in media {
        let of = |peer: bool| -> Vec<usize> {
            (0..roles.len())
                .filter(|&i| roles.get(i) == Some(&Role { medium, peer }))
                .collect()
        };
        let (mut ours, mut peers) = (of(false), of(true));
        if !ours.is_empty() {
            let k = run % ours.len();
            ours.rotate_left(k);
        }
        if !peers.is_empty() {
            let k = run % peers.len();
            peers.rotate_left(k);
        }
        // Half the peers before rgasnet's paths (rounded up in odd repeats, so that a lone
        // peer runs first every other repeat), the rest after.
        let before = (peers.len() + run % 2) / 2;
        let (first, last) = peers.split_at(before);
        order.extend(first.iter().chain(&ours).chain(last));
    }
    order
}

/// The pairs `(rgasnet's job, peer job)` of a group whose ratio is taken: same medium.
pub fn pairs(roles: &[Role]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, ours) in roles.iter().enumerate() {
        for (j, peer) in roles.iter().enumerate() {
            if ours.pairs_with(peer) {
                out.push((i, j));
            }
        }
    }
    out
}

/// Which jobs to run again (indices, ascending), given their surroundings (`None`: a job that
/// gave no figures, paired with nothing) and the machine's `present` state. Empty when every
/// pair ran in one state. Otherwise the jobs of the pairs that did not run in one state and
/// did not run in the present one; when each of those jobs did (the present state lies
/// between the two), all of them.
pub fn to_run_again(
    pairs: &[(usize, usize)],
    jobs: &[Option<&AroundJob>],
    present: &MachineState,
) -> Vec<usize> {
    let around = |i: usize| jobs.get(i).copied().flatten();
    let mut split: Vec<usize> = Vec::new();
    for &(a, b) in pairs {
        if let (Some(x), Some(y)) = (around(a), around(b)) {
            if !probe::same_state([x, y]) {
                split.extend([a, b]);
            }
        }
    }
    split.sort_unstable();
    split.dedup();
    let strays: Vec<usize> = split
        .iter()
        .copied()
        .filter(|&i| around(i).is_some_and(|j| !probe::ran_in(j, present)))
        .collect();
    if strays.is_empty() {
        split
    } else {
        strays
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NATIVE: Role = Role {
        medium: Medium::Network,
        peer: false,
    };
    const PSHM: Role = Role {
        medium: Medium::SharedMemory,
        peer: false,
    };
    const LOOPBACK: Role = Role {
        medium: Medium::OneRank,
        peer: false,
    };
    const UDP: Role = Role {
        medium: Medium::Network,
        peer: true,
    };
    const SMP: Role = Role {
        medium: Medium::SharedMemory,
        peer: true,
    };

    /// compare's group: native, pshm, loopback, then gasnet-udp, gasnet-smp, gasnet-rgasnet.
    const GROUP: [Role; 6] = [NATIVE, PSHM, LOOPBACK, UDP, SMP, UDP];

    #[test]
    fn each_path_runs_between_its_peers_and_the_blocks_rotate() {
        assert_eq!(arrangement(&GROUP, 0), vec![3, 0, 5, 1, 4, 2]);
        assert_eq!(arrangement(&GROUP, 1), vec![4, 1, 2, 5, 0, 3]);
        assert_eq!(arrangement(&GROUP, 2), vec![2, 3, 0, 5, 1, 4]);
        for run in 0..6 {
            let mut order = arrangement(&GROUP, run);
            order.sort_unstable();
            assert_eq!(order, (0..6).collect::<Vec<_>>(), "run {run}");
        }
        // Without peers: rgasnet's paths alone, the blocks still rotating.
        assert_eq!(arrangement(&[NATIVE, PSHM], 1), vec![1, 0]);
        assert_eq!(arrangement(&[], 3), Vec::<usize>::new());
    }

    #[test]
    fn pairs_join_a_path_with_the_peers_on_its_medium() {
        assert_eq!(pairs(&GROUP), vec![(0, 3), (0, 5), (1, 4)]);
        assert_eq!(pairs(&[NATIVE, PSHM, LOOPBACK]), vec![]);
    }

    fn st(shm: f64) -> MachineState {
        MachineState {
            shm_flag_us: Some(shm),
            udp_rtt_us: Some(6.0),
        }
    }

    fn job(shm: f64) -> AroundJob {
        AroundJob {
            before: st(shm),
            after: st(shm),
        }
    }

    #[test]
    fn only_a_pair_in_two_states_runs_again_and_only_its_stray_half() {
        let (fast, slow) = (job(0.06), job(0.40));
        let pairs = pairs(&GROUP);
        // native and udp in one state, pshm and smp in another, rgasnet-conduit failed.
        let jobs = [
            Some(&fast),
            Some(&slow),
            Some(&fast),
            Some(&fast),
            Some(&slow),
            None,
        ];
        assert_eq!(to_run_again(&pairs, &jobs, &st(0.06)), Vec::<usize>::new());
        // pshm fast, smp slow: the half that did not run in the present state runs again.
        let jobs = [
            Some(&fast),
            Some(&fast),
            Some(&slow),
            Some(&fast),
            Some(&slow),
            Some(&fast),
        ];
        assert_eq!(to_run_again(&pairs, &jobs, &st(0.41)), vec![1]);
        assert_eq!(to_run_again(&pairs, &jobs, &st(0.065)), vec![4]);
        // A present state like neither: both halves.
        assert_eq!(to_run_again(&pairs, &jobs, &st(0.16)), vec![1, 4]);
        // One between two close states (each within the tolerance of it, not of each other).
        let (a, b) = (job(0.10), job(0.16));
        let jobs = [Some(&a), Some(&a), None, Some(&a), Some(&b), None];
        assert_eq!(to_run_again(&pairs, &jobs, &st(0.13)), vec![1, 4]);
    }
}
