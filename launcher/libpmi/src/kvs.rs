//! The state behind the PMI-1 calls: the job's bootstrap session, or a singleton's private
//! key-value space.

use std::collections::HashMap;

use rgasnet_launcher::{Bootstrap, BootstrapError};

/// Longest KVS name, key and value a caller may pass, terminating NUL included (what
/// `PMI_KVS_Get_*_length_max` report).
pub const NAME_MAX: usize = 256;
/// See [`NAME_MAX`].
pub const KEY_MAX: usize = 256;
/// See [`NAME_MAX`].
pub const VALUE_MAX: usize = 4096;

/// Keys of PMI programs live under this prefix in the bootstrap's key space, apart from the
/// keys rgasnet's own layers put there.
const PREFIX: &str = "pmi1:";

/// Why a PMI call failed; each maps to a `PMI_ERR_*` code.
#[derive(Debug)]
pub enum PmiFailure {
    /// Called before `PMI_Init` or after `PMI_Finalize`.
    NotInitialized,
    /// A key nobody put (after the barrier that would have made it visible).
    NoSuchKey(String),
    /// A key, value or name longer than the limits.
    TooLong(&'static str),
    /// The bootstrap failed (its message says why).
    Bootstrap(BootstrapError),
    /// Another process manager started this process (the variable that says so is set).
    ForeignLauncher(&'static str),
}

impl std::fmt::Display for PmiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PmiFailure::NotInitialized => write!(f, "PMI_Init has not been called"),
            PmiFailure::NoSuchKey(k) => write!(f, "no rank put the key {k:?}"),
            PmiFailure::TooLong(what) => write!(f, "the {what} is longer than the PMI limit"),
            PmiFailure::Bootstrap(e) => write!(f, "bootstrap: {e}"),
            PmiFailure::ForeignLauncher(var) => write!(
                f,
                "{var} is set: another process manager started this process; rgasnet's libpmi \
                 serves jobs started by rgasnetrun (start it with rgasnetrun -n N, or link that \
                 process manager's libpmi)"
            ),
        }
    }
}

enum Backend {
    Job(Bootstrap),
    Singleton(HashMap<String, Vec<u8>>),
}

/// One process's PMI session.
pub struct Session {
    backend: Backend,
    rank: u32,
    size: u32,
    name: String,
}

impl Session {
    /// Joins the job `rgasnetrun` started this process in, or becomes a singleton when no
    /// launcher variables are set.
    pub fn start() -> Result<Session, PmiFailure> {
        if std::env::var_os(rgasnet_launcher::env::RANK).is_none() {
            // Started by another process manager (MPICH's hydra, Slurm's PMI-1): a singleton
            // here would run N jobs of one rank each instead of one of N.
            if let Some(var) = ["PMI_FD", "PMI_PORT", "PMI_RANK"]
                .into_iter()
                .find(|v| std::env::var_os(v).is_some())
            {
                return Err(PmiFailure::ForeignLauncher(var));
            }
            return Ok(Session {
                backend: Backend::Singleton(HashMap::new()),
                rank: 0,
                size: 1,
                name: "rgasnet-singleton".into(),
            });
        }
        let boot = Bootstrap::from_env().map_err(PmiFailure::Bootstrap)?;
        let name = format!(
            "rgasnet-{}",
            rgasnet_launcher::env::format_job_key(boot.job_key())
        );
        Ok(Session {
            rank: boot.rank(),
            size: boot.size(),
            backend: Backend::Job(boot),
            name,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of processes in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The name of the job's key-value space.
    pub fn kvs_name(&self) -> &str {
        &self.name
    }

    /// The ranks that share this process's host, in rank order (a singleton: itself).
    pub fn host_ranks(&self) -> Vec<u32> {
        match &self.backend {
            Backend::Job(b) => b.host_ranks().to_vec(),
            Backend::Singleton(_) => vec![0],
        }
    }

    /// Stores `value` under `key`; visible to every rank after the next [`Session::barrier`].
    pub fn put(&mut self, key: &str, value: &[u8]) -> Result<(), PmiFailure> {
        if key.len() >= KEY_MAX {
            return Err(PmiFailure::TooLong("key"));
        }
        if value.len() >= VALUE_MAX {
            return Err(PmiFailure::TooLong("value"));
        }
        match &mut self.backend {
            Backend::Job(b) => b
                .put(&format!("{PREFIX}{key}"), value)
                .map_err(PmiFailure::Bootstrap),
            Backend::Singleton(map) => {
                map.insert(key.to_string(), value.to_vec());
                Ok(())
            }
        }
    }

    /// Reads `key`.
    pub fn get(&self, key: &str) -> Result<Vec<u8>, PmiFailure> {
        match &self.backend {
            Backend::Job(b) => match b.get(&format!("{PREFIX}{key}")) {
                Ok(v) => Ok(v),
                Err(BootstrapError::KeyNotFound { .. }) => {
                    Err(PmiFailure::NoSuchKey(key.to_string()))
                }
                Err(e) => Err(PmiFailure::Bootstrap(e)),
            },
            Backend::Singleton(map) => map
                .get(key)
                .cloned()
                .ok_or_else(|| PmiFailure::NoSuchKey(key.to_string())),
        }
    }

    /// Collective: returns when every rank's earlier puts are visible to every rank.
    pub fn barrier(&self) -> Result<(), PmiFailure> {
        match &self.backend {
            Backend::Job(b) => b.fence().map_err(PmiFailure::Bootstrap),
            Backend::Singleton(_) => Ok(()),
        }
    }

    /// Ends the job with `code` (every rank), after printing `message`.
    pub fn abort(&self, code: i32, message: &str) -> ! {
        eprintln!("PMI_Abort({code}) on rank {}: {message}", self.rank);
        match &self.backend {
            Backend::Job(b) => b.abort(code),
            Backend::Singleton(_) => std::process::exit(code),
        }
    }

    /// Tells the launcher this rank is done with PMI.
    pub fn finalize(&self) {
        if let Backend::Job(b) = &self.backend {
            b.finalize();
        }
    }
}
