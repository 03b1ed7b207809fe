//! Every environment variable of the launcher and the bootstrap, in one place.
//!
//! `rgasnetrun` sets the `RGASNET_*` rank variables for each process it starts; the bootstrap
//! library ([`crate::Bootstrap::from_env`]) reads them. The `GASNET_*` and `MPIRUN_CMD` names are
//! GASNet's, read by `rgasnetrun` as defaults that its command-line options override.

use crate::error::BootstrapError;

/// Rank of this process, `0..RGASNET_SIZE`.
pub const RANK: &str = "RGASNET_RANK";
/// Number of ranks in the job.
pub const SIZE: &str = "RGASNET_SIZE";
/// The job's random 64-bit key, 16 hex digits; presented on every bootstrap connection.
pub const JOB_KEY: &str = "RGASNET_JOB_KEY";
/// `host:port` of the launcher's bootstrap server.
pub const BOOTSTRAP: &str = "RGASNET_BOOTSTRAP";
/// Ranks spawned on the same host as this one: comma-separated ranks or `a-b` ranges
/// (e.g. `0-3` or `4,5,7`), sorted, including this rank.
pub const HOST_RANKS: &str = "RGASNET_HOST_RANKS";
/// Name of the host this rank was spawned on, as the launcher knows it (`localhost` for local
/// jobs, the host-list entry for ssh jobs).
pub const HOST: &str = "RGASNET_HOST";
/// Which spawner started the job: `local`, `ssh`, `slurm` or `mpi`.
pub const SPAWNER: &str = "RGASNET_SPAWNER";
/// Launcher: the address ranks are told to connect to (default: the address this machine uses
/// to reach the first remote host, `127.0.0.1` for local jobs).
pub const BOOTSTRAP_HOST: &str = "RGASNET_BOOTSTRAP_HOST";
/// Launcher: seconds between SIGTERM and SIGKILL when a job is stopped (default 1).
pub const KILL_GRACE: &str = "RGASNET_KILL_GRACE";

/// GASNet: the spawner, `L` (local), `S` (ssh) or `M` (mpi); the long names (`slurm` too).
pub const GASNET_SPAWNFN: &str = "GASNET_SPAWNFN";
/// GASNet-EX: the spawner of conduits that offer several, `ssh`, `mpi` or `pmi` (`pmi` and
/// `slurm` start the job with `srun`); `local` too. [`GASNET_SPAWNFN`] wins when both are set.
pub const GASNET_SPAWNER: &str = "GASNET_SPAWNER";
/// Launcher, slurm spawner: extra `srun` options, split on whitespace (e.g. `--partition=debug`).
pub const SRUN_OPTIONS: &str = "RGASNET_SRUN_OPTIONS";
/// Slurm: set in every process of an allocation (`salloc`, `sbatch`, `srun`).
pub const SLURM_JOB_ID: &str = "SLURM_JOB_ID";
/// Slurm: the allocation's nodes as a host-list expression (e.g. `n[01-04],gpu7`).
pub const SLURM_JOB_NODELIST: &str = "SLURM_JOB_NODELIST";
/// Slurm: the rank of a task within its step.
pub const SLURM_PROCID: &str = "SLURM_PROCID";
/// GASNet: hosts for the ssh spawner, separated by commas, spaces or newlines.
pub const GASNET_SSH_SERVERS: &str = "GASNET_SSH_SERVERS";
/// GASNet: the ssh command (default `ssh`).
pub const GASNET_SSH_CMD: &str = "GASNET_SSH_CMD";
/// GASNet: extra ssh options, split on whitespace (e.g. `-p 2222 -i key`).
pub const GASNET_SSH_OPTIONS: &str = "GASNET_SSH_OPTIONS";
/// GASNet: absolute path of `rgasnetrun` on the remote hosts (default: this executable's path).
pub const GASNET_SSH_REMOTE_PATH: &str = "GASNET_SSH_REMOTE_PATH";
/// GASNet: `1` makes the launcher trace every step, like `-v`.
pub const GASNET_SPAWN_VERBOSE: &str = "GASNET_SPAWN_VERBOSE";
/// GASNet: the mpirun command template (`%N` processes, `%P` program, `%A` arguments,
/// `%C` = `%P %A`, `%M` nodes, `%H` hostfile, `%%` a percent sign).
pub const MPIRUN_CMD: &str = "MPIRUN_CMD";

/// Internal: the job key for agents started by `srun` (which has no per-task stdin to carry it).
pub const AGENT_JOB_KEY: &str = "RGASNET_AGENT_JOB_KEY";
/// Internal: set by the launcher for the exec shim, the pid the shim must still have as parent.
pub const SHIM_PARENT: &str = "RGASNET_SHIM_PARENT";

/// Parses a job key as [`format_job_key`] writes it: exactly 16 hex digits.
pub fn parse_job_key(text: &str) -> Result<u64, &'static str> {
    if text.len() != 16 {
        return Err("must be exactly 16 hex digits");
    }
    u64::from_str_radix(text, 16).map_err(|_| "not hexadecimal")
}

/// What a rank learns from the `RGASNET_*` variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankEnv {
    /// This rank.
    pub rank: u32,
    /// Number of ranks.
    pub size: u32,
    /// The job key.
    pub job_key: u64,
    /// `host:port` of the bootstrap server.
    pub bootstrap: String,
    /// Ranks on this rank's host, sorted.
    pub host_ranks: Vec<u32>,
}

/// Formats a job key as `RGASNET_JOB_KEY` carries it.
pub fn format_job_key(key: u64) -> String {
    format!("{key:016x}")
}

/// Formats a sorted rank list compactly (`0-3,6`).
pub fn format_rank_list(ranks: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ranks.len() {
        let start = ranks[i];
        let mut end = start;
        while i + 1 < ranks.len() && ranks[i + 1] == end.wrapping_add(1) {
            i += 1;
            end = ranks[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// Parses a rank list written by [`format_rank_list`] (or by hand: any order, duplicates allowed);
/// every rank must be below `size`.
pub fn parse_rank_list(text: &str, size: u32) -> Result<Vec<u32>, String> {
    let mut ranks = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (parse_u32(a)?, parse_u32(b)?),
            None => {
                let r = parse_u32(part)?;
                (r, r)
            }
        };
        if lo > hi {
            return Err(format!("range {part} is reversed"));
        }
        if hi >= size {
            return Err(format!("rank {hi} is not below the job size {size}"));
        }
        ranks.extend(lo..=hi);
    }
    ranks.sort_unstable();
    ranks.dedup();
    Ok(ranks)
}

fn parse_u32(s: &str) -> Result<u32, String> {
    s.trim()
        .parse::<u32>()
        .map_err(|_| format!("{s:?} is not a rank number"))
}

fn bad(var: &'static str, value: &str, reason: impl Into<String>) -> BootstrapError {
    BootstrapError::BadEnv {
        var,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Reads the rank variables through `get` (normally `std::env::var`), so tests need not touch
/// the process environment. `Ok(None)` when `RGASNET_RANK` is absent (not launched by
/// rgasnetrun); a typed error when a variable is missing or malformed.
pub fn parse_rank_env(
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<RankEnv>, BootstrapError> {
    let Some(rank_s) = get(RANK) else {
        return Ok(None);
    };
    let need = |var: &'static str| {
        get(var).ok_or(BootstrapError::BadEnv {
            var,
            value: String::new(),
            reason: format!("it is missing although {RANK} is set"),
        })
    };
    let size_s = need(SIZE)?;
    let size: u32 = size_s
        .trim()
        .parse()
        .map_err(|_| bad(SIZE, &size_s, "not a positive integer"))?;
    if size == 0 {
        return Err(bad(SIZE, &size_s, "the job size must be at least 1"));
    }
    let rank: u32 = rank_s
        .trim()
        .parse()
        .map_err(|_| bad(RANK, &rank_s, "not a non-negative integer"))?;
    if rank >= size {
        return Err(bad(RANK, &rank_s, format!("not below {SIZE}={size}")));
    }
    let key_s = need(JOB_KEY)?;
    let job_key = parse_job_key(&key_s).map_err(|why| bad(JOB_KEY, &key_s, why))?;
    let bootstrap = need(BOOTSTRAP)?;
    if bootstrap
        .rsplit_once(':')
        .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
    {
        return Err(bad(BOOTSTRAP, &bootstrap, "expected host:port"));
    }
    let host_ranks = match get(HOST_RANKS) {
        Some(text) => {
            let list = parse_rank_list(&text, size).map_err(|e| bad(HOST_RANKS, &text, e))?;
            if !list.contains(&rank) {
                return Err(bad(
                    HOST_RANKS,
                    &text,
                    format!("does not contain this rank {rank}"),
                ));
            }
            list
        }
        None => vec![rank],
    };
    Ok(Some(RankEnv {
        rank,
        size,
        job_key,
        bootstrap,
        host_ranks,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        move |k| owned.iter().find(|(a, _)| a == k).map(|(_, b)| b.clone())
    }

    const GOOD: &[(&str, &str)] = &[
        (RANK, "2"),
        (SIZE, "4"),
        (JOB_KEY, "00000000deadbeef"),
        (BOOTSTRAP, "127.0.0.1:4000"),
        (HOST_RANKS, "2-3"),
    ];

    #[test]
    fn parses_a_launched_environment() {
        let e = parse_rank_env(env_of(GOOD)).unwrap().unwrap();
        assert_eq!(
            e,
            RankEnv {
                rank: 2,
                size: 4,
                job_key: 0xdead_beef,
                bootstrap: "127.0.0.1:4000".into(),
                host_ranks: vec![2, 3],
            }
        );
    }

    #[test]
    fn absent_rank_means_not_launched() {
        assert!(parse_rank_env(env_of(&[])).unwrap().is_none());
    }

    #[test]
    fn each_bad_variable_is_named() {
        let cases: &[(&str, &str)] = &[
            (SIZE, "0"),
            (SIZE, "x"),
            (RANK, "4"),
            (RANK, "-1"),
            (JOB_KEY, "deadbeef"),
            (JOB_KEY, "zzzzzzzzzzzzzzzz"),
            (BOOTSTRAP, "nohostport"),
            (BOOTSTRAP, "h:99999"),
            (HOST_RANKS, "0-1"),
            (HOST_RANKS, "3-2"),
            (HOST_RANKS, "2,9"),
        ];
        for (var, value) in cases {
            let mut pairs: Vec<(&str, &str)> =
                GOOD.iter().filter(|(k, _)| k != var).copied().collect();
            pairs.push((var, value));
            match parse_rank_env(env_of(&pairs)) {
                Err(BootstrapError::BadEnv {
                    var: v, value: got, ..
                }) => {
                    assert_eq!((v, got.as_str()), (*var, *value));
                }
                other => panic!("{var}={value}: expected BadEnv, got {other:?}"),
            }
        }
        let missing: Vec<(&str, &str)> = GOOD
            .iter()
            .filter(|(k, _)| *k != JOB_KEY)
            .copied()
            .collect();
        assert!(matches!(
            parse_rank_env(env_of(&missing)),
            Err(BootstrapError::BadEnv { var: JOB_KEY, .. })
        ));
    }

    #[test]
    fn rank_lists_round_trip() {
        assert_eq!(format_rank_list(&[0, 1, 2, 3]), "0-3");
        assert_eq!(format_rank_list(&[4, 5, 7]), "4-5,7");
        assert_eq!(format_rank_list(&[1]), "1");
        assert_eq!(format_rank_list(&[]), "");
        assert_eq!(parse_rank_list("4-5,7", 8).unwrap(), vec![4, 5, 7]);
        assert_eq!(parse_rank_list("7, 4,5,5", 8).unwrap(), vec![4, 5, 7]);
        assert!(parse_rank_list("a", 8).is_err());
        assert_eq!(format_job_key(0xab), "00000000000000ab");
    }
}
