//! Bootstrap through MPI (feature `mpi`): for processes started by `mpirun`, with or without
//! `rgasnetrun`. Collectives map to MPI collectives on `MPI_COMM_WORLD`; the key-value store
//! is exchanged at each fence by an allgather of every rank's pending puts.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use mpi::Threading;

use crate::error::BootstrapError;
use crate::exchange::{decode_puts, encode_puts, hostname, ranks_on_host};

/// Variables that MPI launchers (Open MPI, PMIx, MPICH's Hydra) set in each process.
const MPI_MARKERS: &[&str] = &["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"];

/// Whether this process looks like it was started by an MPI launcher.
pub(crate) fn in_mpi_env() -> bool {
    MPI_MARKERS.iter().any(|v| std::env::var_os(v).is_some())
}

/// What the MPI start-up learned.
pub(crate) struct MpiInfo {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) job_key: u64,
    pub(crate) host_ranks: Vec<u32>,
}

struct State {
    /// Owning the universe keeps MPI initialized; dropping it calls `MPI_Finalize`.
    _universe: Universe,
    puts: Vec<(String, Vec<u8>)>,
    store: HashMap<String, Vec<u8>>,
}

/// The MPI backend. MPI calls are serialized by the mutex; `abort` bypasses it when MPI grants
/// `MPI_THREAD_MULTIPLE`, so that it works while another thread waits in a collective.
pub(crate) struct MpiBoot {
    state: Mutex<State>,
    multiple: bool,
    size: usize,
}

fn world() -> SimpleCommunicator {
    SimpleCommunicator::world()
}

/// Allgather of byte strings of any length: lengths first, then blobs padded to the longest.
fn allgather_var(data: &[u8], size: usize) -> Vec<Vec<u8>> {
    let w = world();
    let mine = data.len() as u64;
    let mut lens = vec![0u64; size];
    w.all_gather_into(&mine, &mut lens[..]);
    let max = lens.iter().copied().max().unwrap_or(0) as usize;
    let mut padded = data.to_vec();
    padded.resize(max, 0);
    let mut all = vec![0u8; max * size];
    w.all_gather_into(&padded[..], &mut all[..]);
    lens.iter()
        .enumerate()
        .map(|(r, &l)| all[r * max..r * max + l as usize].to_vec())
        .collect()
}

impl MpiBoot {
    /// Initializes MPI and learns rank, size, the job key (drawn by rank 0) and the ranks that
    /// share this host name.
    pub(crate) fn start() -> Result<(MpiBoot, MpiInfo), BootstrapError> {
        let (universe, level) =
            mpi::initialize_with_threading(Threading::Multiple).ok_or(BootstrapError::Mpi {
                op: "init",
                reason: "MPI is already initialized in this process".into(),
            })?;
        if level < Threading::Serialized {
            return Err(BootstrapError::Mpi {
                op: "init",
                reason: format!(
                    "the MPI library grants only {level:?} threading; Serialized is needed"
                ),
            });
        }
        let w = world();
        let rank = u32::try_from(w.rank()).unwrap_or(0);
        let size_i = w.size();
        let size = usize::try_from(size_i).unwrap_or(1);
        let mut key = if rank == 0 { rand::random::<u64>() } else { 0 };
        w.process_at_rank(0).broadcast_into(&mut key);
        let me = hostname();
        let hosts = allgather_var(me.as_bytes(), size);
        let host_ranks = ranks_on_host(&hosts, me.as_bytes());
        let boot = MpiBoot {
            state: Mutex::new(State {
                _universe: universe,
                puts: Vec::new(),
                store: HashMap::new(),
            }),
            multiple: level == Threading::Multiple,
            size,
        };
        let info = MpiInfo {
            rank,
            size: size as u32,
            job_key: key,
            host_ranks,
        };
        Ok((boot, info))
    }

    fn lock(&self, op: &'static str) -> Result<MutexGuard<'_, State>, BootstrapError> {
        self.state.lock().map_err(|_| BootstrapError::Mpi {
            op,
            reason: "another thread panicked inside an MPI bootstrap call".into(),
        })
    }

    pub(crate) fn put(&self, key: &str, value: &[u8]) -> Result<(), BootstrapError> {
        let mut st = self.lock("put")?;
        st.puts.push((key.to_string(), value.to_vec()));
        Ok(())
    }

    pub(crate) fn fence(&self) -> Result<(), BootstrapError> {
        let mut st = self.lock("fence")?;
        let mine = encode_puts(&st.puts);
        st.puts.clear();
        for blob in allgather_var(&mine, self.size) {
            let entries = decode_puts(&blob).ok_or(BootstrapError::Mpi {
                op: "fence",
                reason: "a rank sent a malformed key-value list".into(),
            })?;
            st.store.extend(entries);
        }
        Ok(())
    }

    pub(crate) fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BootstrapError> {
        let st = self.lock("get")?;
        Ok(st.store.get(key).cloned())
    }

    pub(crate) fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let _st = self.lock("allgather")?;
        let w = world();
        // Check sizes first: MPI would fail or truncate on mismatched counts.
        let len = mine.len() as u64;
        let mut lens = vec![0u64; self.size];
        w.all_gather_into(&len, &mut lens[..]);
        if let Some((r, l)) = lens.iter().enumerate().find(|(_, &l)| l != len) {
            return Err(BootstrapError::Collective {
                op: "allgather",
                reason: format!(
                    "ranks disagree: this rank gave {len} bytes, rank {r} gave {l} bytes"
                ),
            });
        }
        if mine.is_empty() {
            return Ok(vec![Vec::new(); self.size]);
        }
        let mut all = vec![0u8; mine.len() * self.size];
        w.all_gather_into(mine, &mut all[..]);
        Ok(all.chunks(mine.len()).map(<[u8]>::to_vec).collect())
    }

    pub(crate) fn broadcast(
        &self,
        root: u32,
        data: Option<&[u8]>,
    ) -> Result<Vec<u8>, BootstrapError> {
        let _st = self.lock("broadcast")?;
        let w = world();
        let root_proc = w.process_at_rank(root as i32);
        let mut len = data.map_or(0, |d| d.len() as u64);
        root_proc.broadcast_into(&mut len);
        let mut buf = match data {
            Some(d) => d.to_vec(),
            None => vec![0u8; len as usize],
        };
        root_proc.broadcast_into(&mut buf[..]);
        Ok(buf)
    }

    pub(crate) fn barrier(&self) -> Result<(), BootstrapError> {
        let _st = self.lock("barrier")?;
        world().barrier();
        Ok(())
    }

    /// Ends the job through `MPI_Abort`. Without `MPI_THREAD_MULTIPLE` this is only safe when no
    /// other thread is inside MPI; otherwise it returns and the caller exits with the code,
    /// which makes `mpirun` stop the job.
    pub(crate) fn abort(&self, code: i32) {
        if self.multiple {
            world().abort(code);
        }
        if let Ok(_st) = self.state.try_lock() {
            world().abort(code);
        }
    }
}
