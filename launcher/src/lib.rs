//! # rgasnet-launcher — `rgasnetrun` and the bootstrap protocol
//!
//! The launcher starts the processes of a job (locally, over SSH or under MPI) and serves the
//! bootstrap exchange that the conduit uses at start-up: key-value put/fence/get, allgather,
//! broadcast, barrier and abort (`DESIGN.md` §7).
//!
//! A rank calls [`Bootstrap::from_env`]; it reads the `RGASNET_*` variables ([`env`](mod@env)) that
//! `rgasnetrun` set and connects to the launcher's [`server::BootstrapServer`] over TCP,
//! presenting the job key. Without those variables, a process started by a PMI server
//! bootstraps through it: PMIx with the `pmix` feature (`srun --mpi=pmix`, Open MPI's
//! `mpirun`), PMI-2 with the `pmi2` feature (`srun --mpi=pmi2`); and with the `mpi` feature, a
//! process started by `mpirun` bootstraps through MPI. The order is `rgasnetrun`, PMIx, PMI-2,
//! MPI.
//!
//! Layers: [`proto`] (frames, sans-IO), [`coord`] (the server's state machine, sans-IO),
//! `client` and [`server`] (thin TCP layers), [`env`](mod@env) (every variable name). The PMI
//! clients' `unsafe` is confined to their FFI modules (`pmi/pmix.rs`, `pmi/pmi2.rs`).
#![deny(unsafe_code)]

mod client;
pub mod coord;
pub mod env;
pub mod error;
#[cfg(any(feature = "mpi", feature = "pmix", feature = "pmi2"))]
mod exchange;
#[cfg(feature = "mpi")]
mod mpi_boot;
#[cfg(any(feature = "pmix", feature = "pmi2"))]
mod pmi;
pub mod proto;
pub mod server;

pub use error::{error_chain, BootstrapError, ProtoError, ServerError};

use client::TcpClient;
use proto::{ToClient, ToServer};

enum Backend {
    Tcp(TcpClient),
    #[cfg(feature = "mpi")]
    Mpi(mpi_boot::MpiBoot),
    #[cfg(any(feature = "pmix", feature = "pmi2"))]
    Pmi(pmi::PmiBoot),
}

/// A rank's bootstrap session: who it is in the job and the collective operations used to
/// exchange addresses at start-up. `Send + Sync`; calls from several threads are serialized.
///
/// Collectives (`fence`, `allgather`, `broadcast`, `barrier`) must be entered by every rank in
/// the same order; a mismatch or a rank that leaves fails them with
/// [`BootstrapError::Collective`] instead of hanging.
pub struct Bootstrap {
    rank: u32,
    size: u32,
    job_key: u64,
    host_ranks: Vec<u32>,
    backend: Backend,
}

impl std::fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrap")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("host_ranks", &self.host_ranks)
            .finish_non_exhaustive()
    }
}

/// The other ways to start a rank, for [`BootstrapError::NotLaunched`].
#[cfg(any(feature = "pmix", feature = "pmi2"))]
const MPI_HINT: &str = ", in a Slurm allocation with `rgasnetrun --spawner slurm -n 2 PROGRAM`, \
     or under a PMI server (`srun --mpi=pmix -n 2 PROGRAM`, `srun --mpi=pmi2 ...`, `mpirun`)";
#[cfg(all(feature = "mpi", not(any(feature = "pmix", feature = "pmi2"))))]
const MPI_HINT: &str = ", in a Slurm allocation with `rgasnetrun --spawner slurm -n 2 PROGRAM`, \
     or under MPI (`mpirun -np 2 PROGRAM`)";
#[cfg(not(any(feature = "mpi", feature = "pmix", feature = "pmi2")))]
const MPI_HINT: &str = ", or in a Slurm allocation with `rgasnetrun --spawner slurm -n 2 PROGRAM` \
     (started by `srun` or `mpirun` directly, it needs rgasnet built with the `pmix` or `pmi2` \
     feature)";

impl Bootstrap {
    /// Joins the job this process was started in: from the `RGASNET_*` variables set by
    /// `rgasnetrun`; when those are absent, through a PMI server (features `pmix`, `pmi2`) or
    /// MPI (feature `mpi`).
    pub fn from_env() -> Result<Bootstrap, BootstrapError> {
        let get = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
        match env::parse_rank_env(get)? {
            Some(e) => Self::connect(e),
            None => Self::from_pmi_or_mpi(),
        }
    }

    #[cfg(any(feature = "pmix", feature = "pmi2"))]
    fn from_pmi_or_mpi() -> Result<Bootstrap, BootstrapError> {
        match pmi::detect(|k| std::env::var_os(k).is_some()) {
            Some(server) => {
                let (p, info) = pmi::PmiBoot::start(server)?;
                Ok(Bootstrap {
                    rank: info.rank,
                    size: info.size,
                    job_key: info.job_key,
                    host_ranks: info.host_ranks,
                    backend: Backend::Pmi(p),
                })
            }
            None => Self::from_mpi_or_fail(),
        }
    }

    #[cfg(not(any(feature = "pmix", feature = "pmi2")))]
    fn from_pmi_or_mpi() -> Result<Bootstrap, BootstrapError> {
        Self::from_mpi_or_fail()
    }

    /// Joins a job over TCP with explicitly given parameters (what [`from_env`](Self::from_env)
    /// does after reading the environment); useful to embed the bootstrap in tests.
    pub fn connect(e: env::RankEnv) -> Result<Bootstrap, BootstrapError> {
        let client = TcpClient::connect(&e.bootstrap, e.job_key, e.rank)?;
        Ok(Bootstrap {
            rank: e.rank,
            size: e.size,
            job_key: e.job_key,
            host_ranks: e.host_ranks,
            backend: Backend::Tcp(client),
        })
    }

    #[cfg(feature = "mpi")]
    fn from_mpi_or_fail() -> Result<Bootstrap, BootstrapError> {
        if !mpi_boot::in_mpi_env() {
            return Err(BootstrapError::NotLaunched {
                missing: env::RANK,
                mpi_hint: MPI_HINT,
            });
        }
        let (m, info) = mpi_boot::MpiBoot::start()?;
        Ok(Bootstrap {
            rank: info.rank,
            size: info.size,
            job_key: info.job_key,
            host_ranks: info.host_ranks,
            backend: Backend::Mpi(m),
        })
    }

    #[cfg(not(feature = "mpi"))]
    fn from_mpi_or_fail() -> Result<Bootstrap, BootstrapError> {
        Err(BootstrapError::NotLaunched {
            missing: env::RANK,
            mpi_hint: MPI_HINT,
        })
    }

    /// This process's rank, `0..size()`.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The job's random 64-bit key (the same on every rank).
    pub fn job_key(&self) -> u64 {
        self.job_key
    }

    /// Ranks spawned on this rank's host (same host name), sorted, including this rank.
    pub fn host_ranks(&self) -> &[u32] {
        &self.host_ranks
    }

    /// The IPv4 address through which this host reached the job's bootstrap: the local end of
    /// the connection to `rgasnetrun` (for a job on several hosts, the interface that reaches
    /// the others). `None` when the bootstrap has no such connection (PMI, MPI).
    pub fn local_ip(&self) -> Option<std::net::Ipv4Addr> {
        match &self.backend {
            Backend::Tcp(c) => match c.local_ip()? {
                std::net::IpAddr::V4(v4) => Some(v4),
                std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped(),
            },
            #[cfg(feature = "mpi")]
            Backend::Mpi(_) => None,
            #[cfg(any(feature = "pmix", feature = "pmi2"))]
            Backend::Pmi(_) => None,
        }
    }

    /// Stores `value` under `key`; other ranks can `get` it after the next [`fence`](Self::fence).
    pub fn put(&self, key: &str, value: &[u8]) -> Result<(), BootstrapError> {
        match &self.backend {
            Backend::Tcp(c) => {
                let msg = ToServer::Put {
                    key: key.to_string(),
                    value: value.to_vec(),
                };
                c.call("put", &msg, true).map(|_| ())
            }
            #[cfg(feature = "mpi")]
            Backend::Mpi(m) => m.put(key, value),
            #[cfg(any(feature = "pmix", feature = "pmi2"))]
            Backend::Pmi(p) => p.put(key, value),
        }
    }

    /// Collective: returns when every rank's earlier puts are visible to every rank.
    pub fn fence(&self) -> Result<(), BootstrapError> {
        match &self.backend {
            Backend::Tcp(c) => expect_done(c.call("fence", &ToServer::Fence, false)?, "fence"),
            #[cfg(feature = "mpi")]
            Backend::Mpi(m) => m.fence(),
            #[cfg(any(feature = "pmix", feature = "pmi2"))]
            Backend::Pmi(p) => p.fence(),
        }
    }

    /// Reads `key`. After a fence, a key that no rank put is [`BootstrapError::KeyNotFound`].
    pub fn get(&self, key: &str) -> Result<Vec<u8>, BootstrapError> {
        let value = match &self.backend {
            Backend::Tcp(c) => {
                let msg = ToServer::Get {
                    key: key.to_string(),
                };
                match c.call("get", &msg, false)? {
                    Some(ToClient::Value { value }) => value,
                    other => return Err(unexpected("get", other)),
                }
            }
            #[cfg(feature = "mpi")]
            Backend::Mpi(m) => m.get(key)?,
            #[cfg(any(feature = "pmix", feature = "pmi2"))]
            Backend::Pmi(p) => p.get(key)?,
        };
        value.ok_or_else(|| BootstrapError::KeyNotFound {
            key: key.to_string(),
        })
    }

    /// Collective: every rank contributes a blob of the same size; returns all blobs in rank
    /// order. Different sizes fail on every rank with [`BootstrapError::Collective`].
    pub fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let blobs = match &self.backend {
            Backend::Tcp(c) => {
                let msg = ToServer::Allgather {
                    data: mine.to_vec(),
                };
                match c.call("allgather", &msg, false)? {
                    Some(ToClient::Gathered { blobs }) => blobs,
                    other => return Err(unexpected("allgather", other)),
                }
            }
            #[cfg(feature = "mpi")]
            Backend::Mpi(m) => m.allgather(mine)?,
            #[cfg(any(feature = "pmix", feature = "pmi2"))]
            Backend::Pmi(p) => p.allgather(mine)?,
        };
        if blobs.len() != self.size as usize || blobs.iter().any(|b| b.len() != mine.len()) {
            return Err(BootstrapError::Collective {
                op: "allgather",
                reason: format!(
                    "the launcher returned {} blobs for {} ranks or blobs of the wrong size",
                    blobs.len(),
                    self.size
                ),
            });
        }
        Ok(blobs)
    }

    /// Collective: returns `root`'s bytes on every rank. The root passes `Some(data)`; other
    /// ranks pass `None` (anything they pass is ignored).
    pub fn broadcast(&self, root: u32, data: Option<&[u8]>) -> Result<Vec<u8>, BootstrapError> {
        if root >= self.size {
            return Err(BootstrapError::InvalidArgument {
                op: "broadcast",
                reason: format!("root {root} is not below the job size {}", self.size),
            });
        }
        let data = if root == self.rank {
            Some(data.ok_or_else(|| BootstrapError::InvalidArgument {
                op: "broadcast",
                reason: format!("rank {root} is the root and must pass Some(data)"),
            })?)
        } else {
            None
        };
        match &self.backend {
            Backend::Tcp(c) => {
                let msg = ToServer::Broadcast {
                    root,
                    data: data.map(<[u8]>::to_vec),
                };
                match c.call("broadcast", &msg, false)? {
                    Some(ToClient::Broadcasted { data }) => Ok(data),
                    other => Err(unexpected("broadcast", other)),
                }
            }
            #[cfg(feature = "mpi")]
            Backend::Mpi(m) => m.broadcast(root, data),
            #[cfg(any(feature = "pmix", feature = "pmi2"))]
            Backend::Pmi(p) => p.broadcast(root, data),
        }
    }

    /// Collective: returns when every rank has entered the barrier.
    pub fn barrier(&self) -> Result<(), BootstrapError> {
        match &self.backend {
            Backend::Tcp(c) => {
                expect_done(c.call("barrier", &ToServer::Barrier, false)?, "barrier")
            }
            #[cfg(feature = "mpi")]
            Backend::Mpi(m) => m.barrier(),
            #[cfg(any(feature = "pmix", feature = "pmi2"))]
            Backend::Pmi(p) => p.barrier(),
        }
    }

    /// Says that this rank is done with the bootstrap and ends normally: a PMI server is told
    /// so (`PMIx_Finalize`, `PMI2_Finalize`; `mpirun` counts a rank that exits without it as
    /// failed). Later bootstrap calls fail. Idempotent; nothing to do for `rgasnetrun` and MPI.
    pub fn finalize(&self) {
        match &self.backend {
            Backend::Tcp(_) => {}
            #[cfg(feature = "mpi")]
            Backend::Mpi(_) => {}
            #[cfg(any(feature = "pmix", feature = "pmi2"))]
            Backend::Pmi(p) => p.finalize(),
        }
    }

    /// Ends the whole job with exit status `code` (non-collective, any rank, any thread). The
    /// launcher stops every other rank; this process exits with `code` after the launcher
    /// acknowledged, or after a short bounded wait if the launcher is gone.
    pub fn abort(&self, code: i32) -> ! {
        match &self.backend {
            Backend::Tcp(c) => c.send_abort(code),
            #[cfg(feature = "mpi")]
            Backend::Mpi(m) => m.abort(code),
            #[cfg(any(feature = "pmix", feature = "pmi2"))]
            Backend::Pmi(p) => p.abort(code),
        }
        std::process::exit(code)
    }
}

fn expect_done(reply: Option<ToClient>, op: &'static str) -> Result<(), BootstrapError> {
    match reply {
        Some(ToClient::Done) => Ok(()),
        other => Err(unexpected(op, other)),
    }
}

fn unexpected(op: &'static str, reply: Option<ToClient>) -> BootstrapError {
    BootstrapError::UnexpectedReply {
        op,
        got: reply.as_ref().map_or("nothing", ToClient::name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn bootstrap_is_send_and_sync() {
        assert_send_sync::<Bootstrap>();
    }
}
