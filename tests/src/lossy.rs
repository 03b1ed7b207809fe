//! Jobs over a lossy network: a private network namespace (`unshare --net`) whose loopback
//! drops and duplicates UDP datagrams at random (nftables `numgen random`), so that the
//! transport's retransmission, its duplicate suppression and the conduit's end are checked
//! across real processes and real sockets, not only on the simulated network.
//!
//! Datagrams are dropped on input, after the sender's `sendto` succeeded, as a lossy network
//! drops them; duplicates are made on output. The bootstrap's TCP connections are left alone.
//! Machines that cannot make the namespace (no `unshare`, `ip` or `nft`, or no permission) skip
//! these jobs with a line in `$RGASNET_SKIP_LOG`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::{rgasnetrun, run_command, JobOutput};

/// How much of the traffic the namespace's loopback mangles, in datagrams per thousand.
#[derive(Clone, Copy, Debug)]
pub struct Loss {
    /// Datagrams dropped on arrival.
    pub drop_permille: u32,
    /// Datagrams sent twice.
    pub duplicate_permille: u32,
}

/// The shell script run inside the namespace: loopback up, the nftables rules, then the job
/// (`$3…`). `$1` and `$2` are the drop and duplicate rates per thousand.
const SCRIPT: &str = r#"set -e
ip link set lo up
nft -f - <<RULES
table ip rgasnet_lossy {
  chain input { type filter hook input priority 0; meta l4proto udp numgen random mod 1000 < $1 drop; }
  chain output { type filter hook output priority 0; meta l4proto udp numgen random mod 1000 < $2 dup to 127.0.0.1 device lo; }
}
RULES
shift 2
exec "$@"
"#;

fn in_namespace(loss: Loss) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--", "sh", "-c", SCRIPT, "sh"])
        .arg(loss.drop_permille.to_string())
        .arg(loss.duplicate_permille.to_string());
    cmd
}

/// Why this machine cannot run lossy jobs, if it cannot (checked once).
fn unavailable() -> Option<&'static str> {
    static WHY: OnceLock<Option<String>> = OnceLock::new();
    WHY.get_or_init(|| {
        let probe = in_namespace(Loss {
            drop_permille: 1,
            duplicate_permille: 1,
        })
        .arg("true")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
        match probe {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!(
                "cannot make a lossy network namespace ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Some(format!("cannot run unshare: {e}")),
        }
    })
    .as_deref()
}

fn skip(test: &str, why: &str) {
    crate::skip(
        test,
        &format!(
            "{why}; fix: run as root (or with user namespaces) after apt-get install -y nftables iproute2"
        ),
    );
}

/// Runs `rgasnetrun -n ranks program args…` in a namespace that mangles `loss` of its UDP
/// datagrams, bounded by `timeout` like [`crate::run_job`]. `None` (after logging why, under
/// `test`'s name) when this machine cannot make such a namespace.
pub fn run_lossy_job(
    test: &str,
    loss: Loss,
    ranks: u32,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> Option<JobOutput> {
    if let Some(why) = unavailable() {
        skip(test, why);
        return None;
    }
    let mut cmd = in_namespace(loss);
    cmd.arg(rgasnetrun())
        .arg("-n")
        .arg(ranks.to_string())
        .arg("--")
        .arg(program)
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Some(run_command(cmd, timeout))
}
