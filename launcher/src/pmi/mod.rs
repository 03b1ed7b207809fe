//! Bootstrap through a PMI server (features `pmix`, `pmi2`): for ranks that a resource manager
//! or launcher started without `rgasnetrun` — `srun --mpi=pmix`, `srun --mpi=pmi2`, Open MPI's
//! `mpirun` (a PMIx server) — rank, size, key-value exchange and barrier come from the server's
//! client library.
//!
//! The PMI calls are few ([`PmiClient`]); the bootstrap's operations are built on them here,
//! the same way for both libraries. Every collective is one PMI exchange (commit, fence with
//! data collection, gets): each rank publishes one value under a key numbered by the
//! collective's sequence number, so that no key is ever put twice. A fence publishes the
//! rank's pending puts as one list, and every rank merges all lists into its own store, from
//! which `get` answers without another call. Host ranks are the ranks that share this host
//! name, as `rgasnetrun` gives them; the job key is drawn by rank 0.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::error::BootstrapError;
use crate::exchange::{decode_puts, encode_puts, hostname, ranks_on_host};

#[cfg(feature = "pmi2")]
mod pmi2;
#[cfg(feature = "pmix")]
mod pmix;

/// The calls of a PMI client library that the bootstrap needs.
pub(crate) trait PmiClient: Send {
    /// `PMIx` or `PMI-2`, for messages.
    fn server(&self) -> &'static str;
    /// This process's rank.
    fn rank(&self) -> u32;
    /// The number of ranks.
    fn size(&self) -> u32;
    /// Publishes this rank's `value` under `key`; visible to every rank after [`exchange`].
    ///
    /// [`exchange`]: PmiClient::exchange
    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), BootstrapError>;
    /// Collective: commits this rank's puts and returns when every rank's are visible.
    fn exchange(&mut self) -> Result<(), BootstrapError>;
    /// Reads what `rank` put under `key` before the last exchange.
    fn get(&mut self, rank: u32, key: &str) -> Result<Vec<u8>, BootstrapError>;
    /// Collective: returns when every rank has entered it.
    fn barrier(&mut self) -> Result<(), BootstrapError>;
    /// Tells the server that this rank ends normally; later calls are not made.
    fn finalize(&mut self);
    /// Asks the server to end the whole job with `code` (a process may call it while another
    /// thread is inside a collective; clients that cannot, return instead).
    fn abort(&self, code: i32, msg: &str);
}

/// A PMI server found in the environment, with its client library compiled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Server {
    /// PMIx (`PMIX_NAMESPACE` and `PMIX_RANK` set).
    #[cfg(feature = "pmix")]
    Pmix,
    /// PMI-2 (`PMI_FD` and `PMI_RANK` set, as Slurm's `--mpi=pmi2` does).
    #[cfg(feature = "pmi2")]
    Pmi2,
}

/// The PMI server this process was started under, if its client library is compiled in; PMIx
/// first, then PMI-2.
pub(crate) fn detect(get: impl Fn(&str) -> bool) -> Option<Server> {
    #[cfg(feature = "pmix")]
    if get("PMIX_NAMESPACE") && get("PMIX_RANK") {
        return Some(Server::Pmix);
    }
    #[cfg(feature = "pmi2")]
    if get("PMI_FD") && get("PMI_RANK") {
        return Some(Server::Pmi2);
    }
    None
}

/// What the start-up learned.
pub(crate) struct PmiInfo {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) job_key: u64,
    pub(crate) host_ranks: Vec<u32>,
}

struct State {
    client: Box<dyn PmiClient>,
    /// [`PmiBoot::finalize`] ran: every later call fails.
    finalized: bool,
    /// Sequence number of the next collective (the same on every rank).
    seq: u64,
    puts: Vec<(String, Vec<u8>)>,
    store: HashMap<String, Vec<u8>>,
}

impl State {
    /// The key of this rank's contribution to the next collective.
    fn next_key(&mut self) -> String {
        let k = format!("rgasnet.{}", self.seq);
        self.seq += 1;
        k
    }

    /// Every rank's value under `key` after an exchange, in rank order.
    fn gather(&mut self, key: &str) -> Result<Vec<Vec<u8>>, BootstrapError> {
        (0..self.client.size())
            .map(|r| self.client.get(r, key))
            .collect()
    }
}

/// The PMI backend of [`crate::Bootstrap`]. Calls are serialized by the mutex; `abort` goes
/// around it (see [`PmiClient::abort`]).
pub(crate) struct PmiBoot {
    state: Mutex<State>,
    server: &'static str,
}

impl PmiBoot {
    /// Initializes the client library and learns rank, size, the job key and the host ranks
    /// (one exchange).
    pub(crate) fn start(server: Server) -> Result<(PmiBoot, PmiInfo), BootstrapError> {
        let client: Box<dyn PmiClient> = match server {
            #[cfg(feature = "pmix")]
            Server::Pmix => Box::new(pmix::Pmix::init()?),
            #[cfg(feature = "pmi2")]
            Server::Pmi2 => Box::new(pmi2::Pmi2::init()?),
        };
        let (rank, size) = (client.rank(), client.size());
        let name = client.server();
        let mut st = State {
            client,
            finalized: false,
            seq: 0,
            puts: Vec::new(),
            store: HashMap::new(),
        };
        // One exchange carries rank 0's job key and every rank's host name.
        let key = st.next_key();
        let job_key = if rank == 0 { rand::random::<u64>() } else { 0 };
        let me = hostname();
        let mut mine = job_key.to_le_bytes().to_vec();
        mine.extend_from_slice(me.as_bytes());
        st.client.put(&key, &mine)?;
        st.client.exchange()?;
        let all = st.gather(&key)?;
        let mut hosts = Vec::with_capacity(all.len());
        let mut job_key = 0;
        for (r, blob) in all.into_iter().enumerate() {
            let Some((k, host)) = blob.split_first_chunk::<8>() else {
                return Err(BootstrapError::Pmi {
                    server: name,
                    call: "start-up exchange",
                    reason: format!(
                        "rank {r} published {} bytes, not a key and a host",
                        blob.len()
                    ),
                });
            };
            if r == 0 {
                job_key = u64::from_le_bytes(*k);
            }
            hosts.push(host.to_vec());
        }
        let info = PmiInfo {
            rank,
            size,
            job_key,
            host_ranks: ranks_on_host(&hosts, me.as_bytes()),
        };
        let boot = PmiBoot {
            state: Mutex::new(st),
            server: name,
        };
        Ok((boot, info))
    }

    fn lock(&self, call: &'static str) -> Result<MutexGuard<'_, State>, BootstrapError> {
        let st = self.state.lock().map_err(|_| BootstrapError::Pmi {
            server: self.server,
            call,
            reason: "another thread panicked inside a PMI bootstrap call".into(),
        })?;
        if st.finalized {
            return Err(BootstrapError::Pmi {
                server: self.server,
                call,
                reason: "called after this rank finalized its bootstrap".into(),
            });
        }
        Ok(st)
    }

    /// Tells the server that this rank ends normally (once; later calls do nothing).
    pub(crate) fn finalize(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !st.finalized {
            st.finalized = true;
            st.client.finalize();
        }
    }

    pub(crate) fn put(&self, key: &str, value: &[u8]) -> Result<(), BootstrapError> {
        self.lock("put")?
            .puts
            .push((key.to_string(), value.to_vec()));
        Ok(())
    }

    pub(crate) fn fence(&self) -> Result<(), BootstrapError> {
        let mut st = self.lock("fence")?;
        let key = st.next_key();
        let mine = encode_puts(&st.puts);
        st.puts.clear();
        st.client.put(&key, &mine)?;
        st.client.exchange()?;
        for (r, blob) in st.gather(&key)?.into_iter().enumerate() {
            let entries = decode_puts(&blob).ok_or_else(|| BootstrapError::Pmi {
                server: self.server,
                call: "fence",
                reason: format!("rank {r} published a malformed key-value list"),
            })?;
            st.store.extend(entries);
        }
        Ok(())
    }

    pub(crate) fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BootstrapError> {
        Ok(self.lock("get")?.store.get(key).cloned())
    }

    pub(crate) fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let mut st = self.lock("allgather")?;
        let key = st.next_key();
        st.client.put(&key, mine)?;
        st.client.exchange()?;
        let all = st.gather(&key)?;
        // Every rank sees the same lengths, so every rank fails alike.
        if let Some((r, b)) = all.iter().enumerate().find(|(_, b)| b.len() != mine.len()) {
            return Err(BootstrapError::Collective {
                op: "allgather",
                reason: format!(
                    "ranks disagree: this rank gave {} bytes, rank {r} gave {}",
                    mine.len(),
                    b.len()
                ),
            });
        }
        Ok(all)
    }

    pub(crate) fn broadcast(
        &self,
        root: u32,
        data: Option<&[u8]>,
    ) -> Result<Vec<u8>, BootstrapError> {
        let mut st = self.lock("broadcast")?;
        let key = st.next_key();
        if let Some(d) = data {
            st.client.put(&key, d)?;
        }
        st.client.exchange()?;
        match data {
            Some(d) => Ok(d.to_vec()),
            None => st.client.get(root, &key),
        }
    }

    pub(crate) fn barrier(&self) -> Result<(), BootstrapError> {
        self.lock("barrier")?.client.barrier()
    }

    /// Ends the job through the server; returns if the client cannot be reached (another
    /// thread holds it and the library is not known to be thread-safe), and the caller exits
    /// with the code, which ends the job under `srun --kill-on-bad-exit` or `mpirun`.
    pub(crate) fn abort(&self, code: i32) {
        let msg = format!("rgasnet: a rank called abort({code})");
        match self.state.try_lock() {
            Ok(st) => st.client.abort(code, &msg),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().client.abort(code, &msg),
            Err(std::sync::TryLockError::WouldBlock) => {
                #[cfg(feature = "pmix")]
                if self.server == pmix::SERVER {
                    // PMIx is thread-safe: abort alongside the waiting thread.
                    pmix::abort_job(code, &msg);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_follows_its_variables() {
        let none = |_: &str| false;
        assert_eq!(detect(none), None);
        #[cfg(feature = "pmix")]
        assert_eq!(
            detect(|v| matches!(v, "PMIX_NAMESPACE" | "PMIX_RANK" | "PMI_FD" | "PMI_RANK")),
            Some(Server::Pmix)
        );
        #[cfg(feature = "pmi2")]
        assert_eq!(
            detect(|v| matches!(v, "PMI_FD" | "PMI_RANK")),
            Some(Server::Pmi2)
        );
    }
}
