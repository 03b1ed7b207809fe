//! A private one-host Slurm for the tests (`scripts/slurm-one-host.sh`), started once per test
//! binary and stopped by the script's watcher when the binary exits; tests that use it take
//! turns (one job at a time on this small machine).

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The running Slurm: its configuration file, and the namespace its commands run in.
#[derive(Debug)]
pub struct Cluster {
    /// `SLURM_CONF` of every Slurm command of the tests.
    pub conf: PathBuf,
    /// The network namespace of slurmctld (nodes that are namespace hosts), where the
    /// commands run; `None` for this host's own.
    pub netns: Option<String>,
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
static TURN: Mutex<()> = Mutex::new(());

fn start() -> Result<Cluster, String> {
    start_script("slurm", None)
}

/// Runs `scripts/slurm-one-host.sh start` in a fresh directory named after `tag`, over the
/// namespace hosts of `lab` when given; stopped by the script's watcher when this process ends.
pub(crate) fn start_script(tag: &str, lab: Option<&crate::netns::Lab>) -> Result<Cluster, String> {
    let dir = std::env::temp_dir().join(format!("rgasnet-{tag}-{}", std::process::id()));
    let owner = std::process::id().to_string();
    let mut args = vec![OsStr::new("start"), dir.as_os_str()];
    let mut env = vec![("SLURM_ONE_HOST_OWNER", OsStr::new(&owner))];
    if let Some(lab) = lab {
        // Two CPUs per namespace host: a 4-rank job spans both.
        args.push(OsStr::new("2"));
        env.push(("SLURM_NETNS_DIR", lab.dir.as_os_str()));
    }
    let stdout = crate::setup_script("slurm-one-host.sh", &args, &env)?;
    let conf = stdout
        .lines()
        .find_map(|l| l.strip_prefix("export SLURM_CONF="))
        .unwrap_or_else(|| panic!("no SLURM_CONF in the script's output: {stdout}"));
    Ok(Cluster {
        conf: PathBuf::from(conf.trim()),
        netns: lab.map(|l| l.lab_ns.clone()),
    })
}

/// The test binary's one-host Slurm and this test's turn on it; `None` (after a SKIPPED line)
/// where Slurm cannot run here.
pub fn cluster(test: &str) -> Option<(&'static Cluster, MutexGuard<'static, ()>)> {
    if !nix::unistd::geteuid().is_root() {
        crate::skip(
            test,
            "the one-host Slurm needs root (slurmd runs jobs as their users)",
        );
        return None;
    }
    match CLUSTER.get_or_init(start) {
        Ok(c) => Some((c, TURN.lock().unwrap_or_else(|p| p.into_inner()))),
        Err(why) => {
            crate::skip(
                test,
                &format!("{why}; fix: apt-get install -y slurm-wlm munge"),
            );
            None
        }
    }
}

impl Cluster {
    /// `program args…` with this cluster's `SLURM_CONF` and no `GASNET_*`/`RGASNET_*`
    /// variables of the test's own environment.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
        let mut c = match &self.netns {
            None => Command::new(program),
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(program);
                c
            }
        };
        for (k, _) in std::env::vars() {
            if k.starts_with("GASNET_") || k.starts_with("RGASNET_") || k.starts_with("SLURM_") {
                c.env_remove(k);
            }
        }
        c.env("SLURM_CONF", &self.conf).args(args);
        c
    }
}
