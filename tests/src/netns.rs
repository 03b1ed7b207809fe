//! Several hosts on this machine (`scripts/netns-hosts.sh`): network namespaces joined by a
//! bridge, each with its own hostname and sshd, set up once per test binary and taken down by
//! the script's watcher when the binary exits. Jobs start from the lab namespace, which holds
//! the bridge; the Slurm over these hosts (`slurm-one-host.sh` with `SLURM_NETNS_DIR`) is
//! started on first use.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::slurm::Cluster;

/// The namespace hosts.
#[derive(Debug)]
pub struct Lab {
    /// The script's directory (its `hosts` and `namespaces` files, ssh keys).
    pub dir: PathBuf,
    /// The namespace with the bridge, from which jobs start.
    pub lab_ns: String,
    /// The hosts' addresses, in order (`10.77.0.11`, ...).
    pub hosts: Vec<String>,
    /// ssh options that reach the hosts' sshd (empty without OpenSSH).
    pub ssh_options: String,
}

static LAB: OnceLock<Result<Lab, String>> = OnceLock::new();
static SLURM: OnceLock<Result<Cluster, String>> = OnceLock::new();
static TURN: Mutex<()> = Mutex::new(());

fn up() -> Result<Lab, String> {
    let dir = std::env::temp_dir().join(format!("rgasnet-netns-{}", std::process::id()));
    let owner = std::process::id().to_string();
    let stdout = crate::setup_script(
        "netns-hosts.sh",
        &[OsStr::new("up"), dir.as_os_str(), OsStr::new("2")],
        &[("NETNS_HOSTS_OWNER", OsStr::new(&owner))],
    )?;
    let get = |k: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or_default()
            .to_string()
    };
    Ok(Lab {
        dir,
        lab_ns: get("LAB_NS"),
        hosts: get("HOSTS").split(',').map(str::to_string).collect(),
        ssh_options: get("SSH_OPTIONS"),
    })
}

/// The namespace hosts and this test's turn on them; `None` (after a SKIPPED line) where this
/// machine cannot make them.
pub fn lab(test: &str) -> Option<(&'static Lab, MutexGuard<'static, ()>)> {
    match LAB.get_or_init(up) {
        Ok(l) => Some((l, TURN.lock().unwrap_or_else(|p| p.into_inner()))),
        Err(why) => {
            crate::skip(
                test,
                &format!("{why}; fix: run as root with iproute2 (network namespaces)"),
            );
            None
        }
    }
}

impl Lab {
    /// `program args…` run in the lab namespace, without the test's own `GASNET_*`,
    /// `RGASNET_*` and `SLURM_*` variables.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.lab_ns])
            .arg(program)
            .args(args);
        for (k, _) in std::env::vars() {
            if k.starts_with("GASNET_") || k.starts_with("RGASNET_") || k.starts_with("SLURM_") {
                c.env_remove(k);
            }
        }
        c
    }

    /// A Slurm whose nodes are these hosts (`nsh1`, `nsh2`, 2 CPUs each); `None` (after a
    /// SKIPPED line) where Slurm cannot run here.
    pub fn slurm(&self, test: &str) -> Option<&'static Cluster> {
        // The lab lives as long as the test binary: so does this Slurm.
        let lab: &'static Lab = LAB.get()?.as_ref().ok()?;
        match SLURM.get_or_init(|| crate::slurm::start_script("slurm-netns", Some(lab))) {
            Ok(c) => Some(c),
            Err(why) => {
                crate::skip(
                    test,
                    &format!("{why}; fix: apt-get install -y slurm-wlm munge"),
                );
                None
            }
        }
    }
}
