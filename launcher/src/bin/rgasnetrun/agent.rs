//! Agent mode: `rgasnetrun` started by ssh on a remote host. It reads the job key from stdin,
//! connects to the launcher's bootstrap server as this host's agent, starts the host's ranks
//! and reports their pids and exits. It stops its ranks (SIGTERM, then SIGKILL) when the
//! launcher says `Kill`, when the control connection drops or when stdin reaches EOF (the ssh
//! session ended): no rank outlives the launcher.

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
use rgasnet_launcher::proto::{self, RankEnd, ToClient, ToServer};

use crate::plan::resolve_program;
use crate::procs::{kill_grace, Children, Outputs};
use crate::rank_env;

/// Arguments of agent mode (built by the ssh spawner, not meant for users).
#[derive(Parser, Debug)]
#[command(name = "rgasnetrun-agent")]
struct AgentArgs {
    #[arg(long)]
    bootstrap: String,
    #[arg(long)]
    host_index: u32,
    #[arg(long)]
    host: String,
    #[arg(long)]
    first: u32,
    #[arg(long)]
    count: u32,
    #[arg(long)]
    size: u32,
    #[arg(long)]
    tag_output: bool,
    #[arg(long)]
    verbose: bool,
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
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
    match run(&a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rgasnetrun agent on {}: {e:#}", a.host);
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

fn run(a: &AgentArgs) -> Result<i32> {
    if a.count == 0 || a.first.checked_add(a.count).is_none_or(|end| end > a.size) {
        bail!(
            "rank range {}+{} does not fit a job of {}",
            a.first,
            a.count,
            a.size
        );
    }
    // Block the terminating signals before any thread starts, so a dedicated thread gets them.
    let mut sigs = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        sigs.add(s);
    }
    sigs.thread_block().context("cannot block signals")?;

    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the job key from stdin")?;
    let key_text = line.trim();
    let job_key = match u64::from_str_radix(key_text, 16) {
        Ok(k) if key_text.len() == 16 => k,
        _ => bail!("the launcher sent no valid job key on stdin"),
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
            host: a.host_index,
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
            let reason = format!("{e:#} (on host {})", a.host);
            send(
                &mut ctl,
                &ToServer::SpawnFailed {
                    rank: a.first,
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
    {
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

    let host_ranks: Vec<u32> = (a.first..a.first + a.count).collect();
    let children = Children::default();
    let mut outputs = Outputs::new();
    for r in a.first..a.first + a.count {
        let envs = rank_env(
            r,
            a.size,
            job_key,
            &a.bootstrap,
            &host_ranks,
            &a.host,
            "ssh",
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
                let reason = format!("{e:#} (on host {})", a.host);
                send(&mut ctl, &ToServer::SpawnFailed { rank: r, reason })?;
                return Ok(127);
            }
        }
    }
    drop(tx);

    let grace = kill_grace()?;
    let mut left = a.count;
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
                        eprintln!("rgasnetrun agent on {}: {why}; stopping ranks", a.host);
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
