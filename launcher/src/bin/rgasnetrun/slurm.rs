//! The slurm spawner: inside a Slurm allocation, one `srun` step runs `rgasnetrun` in agent
//! mode on each node (one task per node, given every CPU the job has there); each agent starts
//! its node's block of ranks and reports to the launcher's bootstrap server, as the ssh
//! spawner's agents do. The launcher, not srun, decides the job's exit code (the failing
//! rank's), so a rank's failure is reported as it is: srun itself would answer with the
//! 128+SIGTERM of the ranks it stopped.

use std::ffi::OsString;
use std::net::ToSocketAddrs;
use std::path::Path;
use std::process::Stdio;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use nix::sys::signal::Signal;
use rgasnet_launcher::env;

use crate::cli::Job;
use crate::job::{catch_signals, trace, Event, Sessions};
use crate::plan::{block_distribution, resolve_program};
use crate::procs::{kill_grace, Children, Hold, Outputs, Sink};
use crate::ssh::{advertised_ip, agent_server, supervise_agents, AgentFleet};

/// Agents must join this soon after srun started: srun creates the step and starts a task
/// per node, which takes longer than an ssh session on a busy controller.
const AGENT_TIMEOUT: Duration = Duration::from_secs(30);

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The hosts of the Slurm allocation this launcher runs in, the first `nodes` of them (default:
/// all, but not more than there are ranks); an error that says how to get an allocation when
/// there is none.
pub(crate) fn allocation_hosts(nodes: Option<u32>, ranks: u32) -> Result<Vec<String>> {
    let Some(job_id) = var(env::SLURM_JOB_ID) else {
        bail!(
            "--spawner slurm needs a Slurm allocation, and this process has none ({} is not \
             set): run it inside one, e.g. `salloc -N 2 rgasnetrun -n 8 --spawner slurm ./app`, \
             or from an sbatch script",
            env::SLURM_JOB_ID
        );
    };
    let list = var(env::SLURM_JOB_NODELIST).or_else(|| var("SLURM_NODELIST"));
    let Some(list) = list else {
        bail!(
            "Slurm job {job_id}: {} is not set; is this a Slurm allocation?",
            env::SLURM_JOB_NODELIST
        );
    };
    let all = crate::hostlist::expand(&list, env::SLURM_JOB_NODELIST)?;
    let n = match nodes {
        Some(0) => bail!("-N 0: a job needs at least one node"),
        Some(n) if n as usize > all.len() => bail!(
            "-N {n} asks for {n} nodes but Slurm job {job_id} has {} ({list}); lower -N or \
             allocate more nodes",
            all.len()
        ),
        Some(n) if n > ranks => bail!("-N {n} is more nodes than ranks (-n {ranks}); lower -N"),
        Some(n) => n as usize,
        None => all.len().min(ranks as usize),
    };
    Ok(all[..n].to_vec())
}

/// srun's arguments: one agent task per node, every CPU the job has there (`--whole`), no
/// MPI plugin, no stdin; a failing agent ends the step.
fn srun_args(job: &Job, boot: &str) -> Vec<String> {
    let nodes = job.hosts.len();
    let mut v: Vec<String> = vec![
        format!("--nodes={nodes}"),
        format!("--ntasks={nodes}"),
        "--ntasks-per-node=1".into(),
        "--whole".into(),
        "--kill-on-bad-exit=1".into(),
        "--mpi=none".into(),
        "--input=none".into(),
        format!("--job-name=rgasnet-{}", program_name(job)),
    ];
    if let Some(extra) = var(env::SRUN_OPTIONS) {
        v.extend(extra.split_whitespace().map(str::to_string));
    }
    v.push(job.ssh.remote_path.clone());
    v.push(crate::AGENT_ARG.into());
    for (flag, val) in [
        ("--bootstrap", boot.to_string()),
        ("--slurm-nodes", nodes.to_string()),
        ("--size", job.ranks.to_string()),
    ] {
        v.push(flag.into());
        v.push(val);
    }
    if job.tag_output {
        v.push("--tag-output".into());
    }
    if job.verbose {
        v.push("--verbose".into());
    }
    v.push("--".into());
    v.push(job.program.to_string_lossy().into_owned());
    v.extend(job.args.iter().map(|a| a.to_string_lossy().into_owned()));
    v
}

/// A name or address of node `host` that this machine can resolve: the node name itself when
/// it resolves, else the address Slurm knows for it (`NodeAddr` of `scontrol show node`), so
/// that clusters whose node names are not in DNS work too.
fn reachable_name(host: &str) -> String {
    let resolves = (host, 22)
        .to_socket_addrs()
        .is_ok_and(|mut a| a.any(|a| a.is_ipv4()));
    if resolves {
        return host.to_string();
    }
    let out = std::process::Command::new("scontrol")
        .args(["show", "node", "-o", host])
        .stderr(Stdio::null())
        .output();
    out.ok()
        .and_then(|o| node_addr(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or_else(|| host.to_string())
}

/// `NodeAddr=` of one `scontrol show node -o` line.
fn node_addr(line: &str) -> Option<String> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("NodeAddr="))
        .filter(|a| !a.is_empty())
        .map(str::to_string)
}

fn program_name(job: &Job) -> String {
    Path::new(&job.program)
        .file_name()
        .map_or_else(|| "job".into(), |f| f.to_string_lossy().into_owned())
}

pub(crate) fn run(job: &Job) -> Result<i32> {
    let grace = kill_grace()?;
    let job_key: u64 = rand::random();
    let hosts = &job.hosts;
    let dist = block_distribution(job.ranks, hosts.len() as u32);
    let srun = resolve_program(Path::new("srun"), std::env::var_os("PATH").as_ref())
        .map_err(|e| e.context("srun cannot run; is Slurm's client installed here?"))?;
    if job.dry_run {
        println!(
            "spawner: slurm, {} rank(s) on {} node(s)",
            job.ranks,
            hosts.len()
        );
        for (h, (first, count)) in hosts.iter().zip(&dist) {
            let ranks: Vec<u32> = (*first..first + count).collect();
            println!("node {h}: ranks {}", env::format_rank_list(&ranks));
        }
        let args = srun_args(job, "<launcher-ip>:<port chosen at start>");
        println!("{} {}", srun.display(), args.join(" "));
        println!(
            "each agent gets {} in its environment; each rank gets RGASNET_RANK, RGASNET_SIZE, \
             RGASNET_JOB_KEY, RGASNET_BOOTSTRAP, RGASNET_HOST_RANKS, RGASNET_HOST, \
             RGASNET_SPAWNER=slurm",
            env::AGENT_JOB_KEY
        );
        return Ok(0);
    }
    let ip = advertised_ip(&reachable_name(&hosts[0]))?;
    let (tx, rx) = mpsc::channel();
    catch_signals(tx.clone());
    // srun's own messages are held until an agent joins: if the step cannot start, the
    // failure is reported in one line that quotes them.
    let hold: Arc<Mutex<Hold>> = Arc::default();
    let (server, boot) = {
        let hold = Arc::clone(&hold);
        agent_server(job, job_key, ip, &tx, AGENT_TIMEOUT, move |_| {
            Hold::release(&hold, Sink::Stderr);
        })?
    };
    let args = srun_args(job, &boot);
    trace(job.verbose, || {
        format!(
            "bootstrap server listening on {boot}; running {} {}",
            srun.display(),
            args.join(" ")
        )
    });
    let children = Children::default();
    let mut outputs = Outputs::new();
    let argv: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let envs = vec![(env::AGENT_JOB_KEY.to_string(), env::format_job_key(job_key))];
    let tx2 = tx.clone();
    let hosts_n = hosts.len();
    let hold2 = Arc::clone(&hold);
    let started = children.spawn(
        &srun,
        &argv,
        &envs,
        None,
        &mut outputs,
        Some(Arc::clone(&hold)),
        Stdio::null(),
        move |_pid, end| {
            let detail = Hold::text(&hold2);
            // One step carries every node's agent: its end is each host's session end.
            for host in 0..hosts_n {
                let _ = tx2.send(Event::SshEnded {
                    host,
                    end,
                    detail: detail.clone(),
                });
            }
        },
    );
    if let Err(e) = started {
        return Err(e.context("starting srun"));
    }
    drop(tx);
    let fleet = AgentFleet {
        sessions: children,
        server,
        kill_signal: Signal::SIGTERM,
    };
    let code = supervise_agents(job, &dist, rx, grace, fleet, Sessions::Srun);
    outputs.drain(Instant::now() + Duration::from_secs(1));
    trace(job.verbose, || format!("job ended, exit code {code}"));
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_addresses_come_from_scontrol_lines() {
        let line =
            "NodeName=nsh1 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.77.0.11 NodeHostName=nsh1";
        assert_eq!(node_addr(line).as_deref(), Some("10.77.0.11"));
        assert_eq!(node_addr("Node nsh9 not found"), None);
    }
}
