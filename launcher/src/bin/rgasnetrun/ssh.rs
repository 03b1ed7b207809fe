//! The ssh spawner: one `ssh` per host runs `rgasnetrun` in agent mode there; the agent starts
//! that host's ranks, reports their pids and exits over a control connection to the launcher's
//! bootstrap server, and kills them when told to or when the launcher goes away.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::Path;
use std::process::Stdio;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::sys::signal::Signal;
use rgasnet_launcher::coord::Report;
use rgasnet_launcher::env;
use rgasnet_launcher::server::BootstrapServer;

use crate::cli::Job;
use crate::job::{catch_signals, trace, Event, Fleet, Sessions, Supervisor};
use crate::local::forward_reports;
use crate::plan::{block_distribution, resolve_program, shell_quote};
use crate::procs::{kill_grace, Children, Hold, Outputs, Sink};

/// Agents must connect back this soon after their ssh started: long enough for ssh's own
/// handshake on a loaded machine (bounded separately by ConnectTimeout), short enough that a
/// host which cannot reach the launcher is reported within the 10 s promised for bad input.
const AGENT_TIMEOUT: Duration = Duration::from_secs(8);

/// Options always given to ssh: never prompt, fail fast on unreachable hosts, notice dead
/// connections.
const SSH_BASE_OPTIONS: &[&str] = &[
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=5",
    "-o",
    "ServerAliveInterval=10",
    "-o",
    "LogLevel=ERROR",
];

/// Rank variables the agent sets itself; never forwarded from the launcher's environment.
const RANK_VARS: &[&str] = &[
    env::RANK,
    env::SIZE,
    env::JOB_KEY,
    env::BOOTSTRAP,
    env::HOST_RANKS,
    env::HOST,
    env::SPAWNER,
    env::SHIM_PARENT,
];

/// The processes that carry the agents (one ssh per host, or one srun for all) and the server
/// the agents report to.
pub(crate) struct AgentFleet {
    pub(crate) sessions: Children,
    pub(crate) server: BootstrapServer,
    /// What stops the sessions by force: SIGKILL for ssh (the agent then sees its stdin and
    /// control connection close and kills its ranks), SIGTERM for srun (which cancels the
    /// step: Slurm kills every process in it).
    pub(crate) kill_signal: Signal,
}

impl Fleet for AgentFleet {
    fn terminate(&mut self) {
        // Agents stop their ranks (SIGTERM, then SIGKILL after the grace) and exit.
        self.server.kill_agents();
    }
    fn kill(&mut self) {
        self.sessions.signal_all(self.kill_signal);
    }
    fn all_gone(&self) -> bool {
        self.sessions.running() == 0
    }
}

/// Supervises a job whose ranks agents start, `dist[i]` (first rank, count) on `hosts[i]`,
/// until it ends; returns the launcher's exit code.
pub(crate) fn supervise_agents(
    job: &Job,
    dist: &[(u32, u32)],
    rx: mpsc::Receiver<Event>,
    grace: Duration,
    mut fleet: AgentFleet,
    sessions: Sessions,
) -> i32 {
    let mut rank_host = Vec::with_capacity(job.ranks as usize);
    for (i, (_, count)) in dist.iter().enumerate() {
        rank_host.extend(std::iter::repeat_n(i, *count as usize));
    }
    let sup = Supervisor {
        rx,
        host_names: job.hosts.clone(),
        rank_host,
        pids: vec![None; job.ranks as usize],
        // Agents run their own SIGTERM→SIGKILL grace; their sessions are stopped by force
        // only if they do not finish.
        grace: grace + Duration::from_secs(2),
        verbose: job.verbose,
        label: None,
        sessions,
    };
    sup.run(&mut fleet)
}

/// Watches the agents of `hosts` hosts join: returns the report hook that notes each join and
/// runs `on_join(host)`; after `timeout`, sends [`Event::StartupTimeout`] naming the hosts
/// whose agent never joined.
fn watch_agents(
    hosts: usize,
    tx: mpsc::Sender<Event>,
    timeout: Duration,
    on_join: impl Fn(usize) + Send + 'static,
) -> impl Fn(&Report) + Send + 'static {
    let joined = Arc::new(Mutex::new(vec![false; hosts]));
    {
        let joined = Arc::clone(&joined);
        let _ = thread::Builder::new()
            .name("agent-timeout".into())
            .spawn(move || {
                thread::sleep(timeout);
                let missing: Vec<usize> = match joined.lock() {
                    Ok(j) => j
                        .iter()
                        .enumerate()
                        .filter(|(_, ok)| !**ok)
                        .map(|(i, _)| i)
                        .collect(),
                    Err(_) => Vec::new(),
                };
                if !missing.is_empty() {
                    let _ = tx.send(Event::StartupTimeout { missing });
                }
            });
    }
    move |r: &Report| {
        if let Report::AgentJoined { host } = r {
            on_join(*host as usize);
            if let Ok(mut j) = joined.lock() {
                if let Some(slot) = j.get_mut(*host as usize) {
                    *slot = true;
                }
            }
        }
    }
}

/// Starts the bootstrap server of a job whose agents join from `job.hosts` (see
/// [`watch_agents`]), on every interface; returns it and the `ip:port` to give the agents.
pub(crate) fn agent_server(
    job: &Job,
    job_key: u64,
    ip: IpAddr,
    tx: &mpsc::Sender<Event>,
    timeout: Duration,
    on_join: impl Fn(usize) + Send + 'static,
) -> Result<(BootstrapServer, String)> {
    let hosts = job.hosts.len();
    let hook = watch_agents(hosts, tx.clone(), timeout, on_join);
    let server = BootstrapServer::start(
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        job.ranks,
        hosts as u32,
        job_key,
        forward_reports(tx.clone(), hook),
    )?;
    let boot = SocketAddr::new(ip, server.local_addr().port()).to_string();
    Ok((server, boot))
}

/// The address remote ranks and agents should use to reach this machine: the local address
/// of the route to the first host, unless `RGASNET_BOOTSTRAP_HOST` says otherwise.
pub(crate) fn advertised_ip(first_host: &str) -> Result<IpAddr> {
    if let Ok(h) = std::env::var(env::BOOTSTRAP_HOST) {
        return (h.as_str(), 0)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.find(SocketAddr::is_ipv4))
            .map(|a| a.ip())
            .with_context(|| {
                format!(
                    "{}={h:?} does not resolve to an IPv4 address",
                    env::BOOTSTRAP_HOST
                )
            });
    }
    let target = (first_host, 22)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.find(SocketAddr::is_ipv4))
        .with_context(|| {
            format!("host {first_host:?} does not resolve to an IPv4 address; check the host name")
        })?;
    let probe =
        UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).context("cannot open a probe socket")?;
    probe
        .connect(target)
        .with_context(|| format!("no route to host {first_host}"))?;
    Ok(probe
        .local_addr()
        .context("probe socket has no address")?
        .ip())
}

/// Variables forwarded to remote ranks: the `-E` names and every GASNET_*/RGASNET_* variable.
fn forwarded_env(export: &[String]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            export.contains(k)
                || ((k.starts_with("GASNET_") || k.starts_with("RGASNET_"))
                    && !RANK_VARS.contains(&k.as_str()))
        })
        .collect();
    out.sort();
    out
}

/// The shell command the remote sshd runs for host `index`.
fn remote_command(
    job: &Job,
    boot: &str,
    index: usize,
    host: &str,
    first: u32,
    count: u32,
) -> String {
    let mut words: Vec<String> = vec!["env".into()];
    for (k, v) in forwarded_env(&job.export) {
        words.push(shell_quote(&format!("{k}={v}")));
    }
    words.push(shell_quote(&job.ssh.remote_path));
    words.push(crate::AGENT_ARG.into());
    for (flag, val) in [
        ("--bootstrap", boot.to_string()),
        ("--host-index", index.to_string()),
        ("--host", host.to_string()),
        ("--first", first.to_string()),
        ("--count", count.to_string()),
        ("--size", job.ranks.to_string()),
    ] {
        words.push(flag.into());
        words.push(shell_quote(&val));
    }
    if job.tag_output {
        words.push("--tag-output".into());
    }
    if job.verbose {
        words.push("--verbose".into());
    }
    words.push("--".into());
    words.push(shell_quote(&job.program.to_string_lossy()));
    for a in &job.args {
        words.push(shell_quote(&a.to_string_lossy()));
    }
    words.join(" ")
}

fn ssh_argv(job: &Job, host: &str, remote: String) -> Vec<String> {
    let mut v: Vec<String> = SSH_BASE_OPTIONS.iter().map(|s| s.to_string()).collect();
    v.extend(job.ssh.options.iter().cloned());
    v.push(host.to_string());
    v.push(remote);
    v
}

pub(crate) fn run(job: &Job) -> Result<i32> {
    let grace = kill_grace()?;
    let job_key: u64 = rand::random();
    let hosts = &job.hosts;
    let dist = block_distribution(job.ranks, hosts.len() as u32);
    let ssh_path = resolve_program(Path::new(&job.ssh.cmd), std::env::var_os("PATH").as_ref())
        .map_err(|e| {
            e.context(format!(
                "ssh command {:?} (GASNET_SSH_CMD) cannot run; install it with `apt-get install openssh-client`",
                job.ssh.cmd
            ))
        })?;
    if job.dry_run {
        println!(
            "spawner: ssh, {} rank(s) on {} host(s)",
            job.ranks,
            hosts.len()
        );
        for (i, (h, (first, count))) in hosts.iter().zip(&dist).enumerate() {
            let remote = remote_command(
                job,
                "<launcher-ip>:<port chosen at start>",
                i,
                h,
                *first,
                *count,
            );
            println!(
                "host {h}: ranks {}: {} {}",
                env::format_rank_list(&(*first..first + count).collect::<Vec<_>>()),
                ssh_path.display(),
                ssh_argv(job, h, remote).join(" ")
            );
        }
        println!("each rank gets RGASNET_RANK, RGASNET_SIZE, RGASNET_JOB_KEY (sent over ssh stdin), RGASNET_BOOTSTRAP, RGASNET_HOST_RANKS, RGASNET_HOST, RGASNET_SPAWNER=ssh");
        return Ok(0);
    }
    let ip = advertised_ip(&hosts[0])?;
    let (tx, rx) = mpsc::channel();
    catch_signals(tx.clone());
    let holds: Vec<Arc<Mutex<Hold>>> = hosts.iter().map(|_| Arc::default()).collect();
    let (server, boot) = {
        let holds = holds.clone();
        agent_server(job, job_key, ip, &tx, AGENT_TIMEOUT, move |host| {
            if let Some(h) = holds.get(host) {
                Hold::release(h, Sink::Stderr);
            }
        })?
    };
    trace(job.verbose, || {
        format!(
            "bootstrap server listening on {boot}, hosts {}",
            hosts.join(",")
        )
    });
    let ssh = Children::default();
    let mut outputs = Outputs::new();
    let mut stdins = Vec::new();
    for (i, (h, (first, count))) in hosts.iter().zip(&dist).enumerate() {
        let argv: Vec<std::ffi::OsString> =
            ssh_argv(job, h, remote_command(job, &boot, i, h, *first, *count))
                .into_iter()
                .map(Into::into)
                .collect();
        trace(job.verbose, || {
            format!(
                "host {h}: ranks {first}..{}: {} {}",
                first + count,
                ssh_path.display(),
                argv.iter()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        });
        let tx2 = tx.clone();
        let hold = Arc::clone(&holds[i]);
        let started = ssh.spawn(
            &ssh_path,
            &argv,
            &[],
            None,
            &mut outputs,
            Some(Arc::clone(&holds[i])),
            Stdio::piped(),
            move |_pid, end| {
                let detail = Hold::text(&hold);
                let _ = tx2.send(Event::SshEnded {
                    host: i,
                    end,
                    detail,
                });
            },
        );
        match started {
            Ok((_, Some(mut stdin))) => {
                // The key travels on stdin, not the command line, so `ps` on the remote host
                // does not show it. The pipe stays open: its EOF tells the agent we are gone.
                let _ = stdin.write_all(format!("{}\n", env::format_job_key(job_key)).as_bytes());
                stdins.push(stdin);
            }
            Ok((_, None)) => bail!("ssh to {h} started without a stdin pipe"),
            Err(e) => {
                ssh.signal_all(Signal::SIGKILL);
                return Err(e.context(format!("starting ssh to {h}")));
            }
        }
    }
    let fleet = AgentFleet {
        sessions: ssh,
        server,
        kill_signal: Signal::SIGKILL,
    };
    let code = supervise_agents(job, &dist, rx, grace, fleet, Sessions::Ssh);
    drop(stdins);
    outputs.drain(Instant::now() + Duration::from_secs(1));
    trace(job.verbose, || format!("job ended, exit code {code}"));
    Ok(code)
}
