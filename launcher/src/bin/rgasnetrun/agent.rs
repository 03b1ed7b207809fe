//! Agent mode: `rgasnetrun` started by ssh on a remote host, or by `srun` on each node of a
//! Slurm allocation. It reads the job key (ssh: from stdin; srun: from its environment, since
//! srun gives only one task the launcher's stdin), connects to the launcher's bootstrap server
//! as this host's agent, starts the host's ranks and reports their pids and exits. It stops its
//! ranks (SIGTERM, then SIGKILL) when the launcher says `Kill`, when the control connection
//! drops, when stdin reaches EOF (ssh: the session ended) or when it gets a signal (srun
//! cancelling the step): no rank outlives the launcher.

use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use nix::sys::signal::{SigSet, Signal};
use rgasnet_launcher::env;
use rgasnet_launcher::proto::{self, RankEnd, ToClient, ToServer};

use crate::plan::{block_distribution, resolve_program};
use crate::procs::{kill_grace, Children, Outputs};
use crate::rank_env;

/// Arguments of agent mode (built by the ssh and slurm spawners, not meant for users).
#[derive(Parser, Debug)]
#[command(name = "rgasnetrun-agent")]
struct AgentArgs {
    #[arg(long)]
    bootstrap: String,
    /// ssh: this host's index, name and rank range (the launcher knows them).
    #[arg(long, required_unless_present = "slurm_nodes")]
    host_index: Option<u32>,
    #[arg(long, required_unless_present = "slurm_nodes")]
    host: Option<String>,
    #[arg(long, required_unless_present = "slurm_nodes")]
    first: Option<u32>,
    #[arg(long, required_unless_present = "slurm_nodes")]
    count: Option<u32>,
    /// srun: the step's node count; the host index is the task's `SLURM_PROCID` (one task
    /// per node), the ranks that node's block of the distribution.
    #[arg(long, conflicts_with_all = ["host_index", "host", "first", "count"])]
    slurm_nodes: Option<u32>,
    #[arg(long)]
    size: u32,
    #[arg(long)]
    tag_output: bool,
    #[arg(long)]
    verbose: bool,
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

/// Where this agent stands in the job, from its arguments (ssh) or from Slurm (srun).
struct Placement {
    host_index: u32,
    host: String,
    first: u32,
    count: u32,
    /// `RGASNET_SPAWNER` of the ranks.
    spawner: &'static str,
}

impl Placement {
    fn of(a: &AgentArgs) -> Result<Placement> {
        let Some(nodes) = a.slurm_nodes else {
            return Ok(Placement {
                host_index: a.host_index.unwrap_or(0),
                host: a.host.clone().unwrap_or_default(),
                first: a.first.unwrap_or(0),
                count: a.count.unwrap_or(0),
                spawner: "ssh",
            });
        };
        let procid = std::env::var(env::SLURM_PROCID).ok();
        let index = match procid.as_deref().map(str::parse::<u32>) {
            Some(Ok(i)) if i < nodes => i,
            _ => bail!(
                "{}={procid:?} is not a task index below {nodes}: the slurm agent runs only as a task of the launcher's srun step",
                env::SLURM_PROCID
            ),
        };
        if nodes == 0 || nodes > a.size {
            bail!(
                "--slurm-nodes {nodes} does not fit a job of {} ranks",
                a.size
            );
        }
        let (first, count) = block_distribution(a.size, nodes)[index as usize];
        let host = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("node{index}"));
        Ok(Placement {
            host_index: index,
            host,
            first,
            count,
            spawner: "slurm",
        })
    }
}

/// The job key the launcher sent (`from` says where), as `env::format_job_key` wrote it.
fn parse_job_key(text: &str, from: &str) -> Result<u64> {
    env::parse_job_key(text.trim())
        .map_err(|why| anyhow::anyhow!("the launcher sent no valid job key {from}: it {why}"))
}

enum AgentEvent {
    Exited { rank: u32, pid: u32, end: RankEnd },
    Stop(&'static str),
}

/// Runs agent mode; returns the process exit code.
pub(crate) fn main(args: &[OsString]) -> i32 {
    let parsed = AgentArgs::try_parse_from(
        std::iter::once(OsString::from("agent")).chain(args.iter().cloned()),
    );
    let a = match parsed {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rgasnetrun agent: bad arguments from the launcher: {e}");
            return 2;
        }
    };
    let place = match Placement::of(&a) {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "rgasnetrun agent: {}",
                rgasnet_launcher::error_chain(e.chain())
            );
            return 2;
        }
    };
    match run(&a, &place) {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "rgasnetrun agent on {}: {}",
                place.host,
                rgasnet_launcher::error_chain(e.chain())
            );
            1
        }
    }
}

fn send(stream: &mut TcpStream, msg: &ToServer) -> Result<()> {
    stream
        .write_all(&proto::encode_to_server(msg))
        .context("lost the control connection to the launcher")
}

fn recv(stream: &mut TcpStream) -> Result<ToClient> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let n = proto::frame_len(&len)?.unwrap_or(0);
    let mut body = vec![0u8; n];
    stream.read_exact(&mut body)?;
    Ok(proto::decode_to_client(&body)?)
}

fn run(a: &AgentArgs, place: &Placement) -> Result<i32> {
    let (first, count) = (place.first, place.count);
    if count == 0 || first.checked_add(count).is_none_or(|end| end > a.size) {
        bail!(
            "rank range {first}+{count} does not fit a job of {}",
            a.size
        );
    }
    let slurm = a.slurm_nodes.is_some();
    // Block the terminating signals before any thread starts, so a dedicated thread gets them.
    let mut sigs = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        sigs.add(s);
    }
    sigs.thread_block().context("cannot block signals")?;

    let job_key = if slurm {
        let text = std::env::var(env::AGENT_JOB_KEY).unwrap_or_default();
        parse_job_key(&text, &format!("in {}", env::AGENT_JOB_KEY))?
    } else {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("cannot read the job key from stdin")?;
        parse_job_key(&line, "on stdin")?
    };
    let addr = a
        .bootstrap
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .with_context(|| format!("bootstrap address {:?} does not resolve", a.bootstrap))?;
    let mut ctl = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("cannot connect back to the launcher at {addr}; is this host able to reach it? (RGASNET_BOOTSTRAP_HOST)"))?;
    let _ = ctl.set_nodelay(true);
    send(
        &mut ctl,
        &ToServer::HelloAgent {
            job_key,
            host: place.host_index,
        },
    )?;
    ctl.set_read_timeout(Some(Duration::from_secs(10)))?;
    match recv(&mut ctl).context("no answer from the launcher")? {
        ToClient::Welcome => {}
        ToClient::Refused { reason } => bail!("the launcher refused this agent: {reason}"),
        other => bail!("unexpected {} from the launcher", other.name()),
    }
    ctl.set_read_timeout(None)?;

    let (prog, args) = a.command.split_first().context("no program")?;
    let program = match resolve_program(&PathBuf::from(prog), std::env::var_os("PATH").as_ref()) {
        Ok(p) => p,
        Err(e) => {
            let reason = format!("{e:#} (on host {})", place.host);
            send(
                &mut ctl,
                &ToServer::SpawnFailed {
                    rank: first,
                    reason,
                },
            )?;
            return Ok(127);
        }
    };

    let (tx, rx) = mpsc::channel();
    {
        let tx = tx.clone();
        let mut reader = ctl.try_clone().context("cannot clone the control socket")?;
        thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                let why = match recv(&mut reader) {
                    Ok(ToClient::Kill) => "the launcher asked to stop",
                    _ => "the control connection to the launcher dropped",
                };
                let _ = tx.send(AgentEvent::Stop(why));
            })?;
    }
    // srun gives the agents no stdin of the launcher's (EOF at once): the control connection
    // and srun's signals tell them when to stop instead.
    if !slurm {
        let tx = tx.clone();
        thread::Builder::new().name("stdin".into()).spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::stdin().lock().read_to_end(&mut sink);
            let _ = tx.send(AgentEvent::Stop("the ssh session ended"));
        })?;
    }
    {
        let tx = tx.clone();
        thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                if sigs.wait().is_ok() {
                    let _ = tx.send(AgentEvent::Stop("the agent received a signal"));
                }
            })?;
    }

    let host_ranks: Vec<u32> = (first..first + count).collect();
    let children = Children::default();
    let mut outputs = Outputs::new();
    for r in first..first + count {
        let envs = rank_env(
            r,
            a.size,
            job_key,
            &a.bootstrap,
            &host_ranks,
            &place.host,
            place.spawner,
        );
        let tx = tx.clone();
        let prefix = a.tag_output.then(|| format!("[{r}] "));
        let spawned = children.spawn(
            &program,
            args,
            &envs,
            prefix,
            &mut outputs,
            None,
            Stdio::null(),
            move |pid, end| {
                let _ = tx.send(AgentEvent::Exited { rank: r, pid, end });
            },
        );
        match spawned {
            Ok((pid, _)) => send(&mut ctl, &ToServer::RankStarted { rank: r, pid })?,
            Err(e) => {
                children.signal_all(Signal::SIGKILL);
                let reason = format!("{e:#} (on host {})", place.host);
                send(&mut ctl, &ToServer::SpawnFailed { rank: r, reason })?;
                return Ok(127);
            }
        }
    }
    drop(tx);

    let grace = kill_grace()?;
    let mut left = count;
    let mut kill_at: Option<Instant> = None;
    while left > 0 {
        let ev = match kill_at {
            None => rx.recv().ok(),
            Some(t) => match rx.recv_timeout(t.saturating_duration_since(Instant::now())) {
                Ok(ev) => Some(ev),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    children.signal_all(Signal::SIGKILL);
                    kill_at = Some(Instant::now() + Duration::from_secs(3600));
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            },
        };
        match ev {
            Some(AgentEvent::Exited { rank, pid, end }) => {
                left -= 1;
                // The launcher may be gone already; the ranks are ours to stop either way.
                let _ = send(&mut ctl, &ToServer::RankExited { rank, pid, end });
            }
            Some(AgentEvent::Stop(why)) => {
                if kill_at.is_none() {
                    if a.verbose {
                        eprintln!("rgasnetrun agent on {}: {why}; stopping ranks", place.host);
                    }
                    children.signal_all(Signal::SIGTERM);
                    kill_at = Some(Instant::now() + grace);
                }
            }
            None => break,
        }
    }
    outputs.drain(Instant::now() + Duration::from_secs(1));
    Ok(0)
}
