//! The local spawner: every rank is a child of the launcher on this host.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Result;
use nix::sys::signal::Signal;
use rgasnet_launcher::coord::Report;
use rgasnet_launcher::server::BootstrapServer;

use crate::cli::Job;
use crate::job::{catch_signals, trace, Event, Fleet, Sessions, Supervisor};
use crate::procs::{kill_grace, Children, Outputs};
use crate::rank_env;

impl Fleet for Children {
    fn terminate(&mut self) {
        self.signal_all(Signal::SIGTERM);
    }
    fn kill(&mut self) {
        self.signal_all(Signal::SIGKILL);
    }
    fn all_gone(&self) -> bool {
        self.running() == 0
    }
}

/// Turns bootstrap reports into supervisor events; `hook` sees each report first (the ssh
/// spawner releases a host's held stderr there). Runs on the server's threads, so it sends
/// the event before the reply that the report causes is written.
pub(crate) fn forward_reports(
    tx: mpsc::Sender<Event>,
    hook: impl Fn(&Report) + Send + 'static,
) -> impl Fn(Report) + Send + 'static {
    move |r| {
        hook(&r);
        let ev = match r {
            Report::RankStarted { rank, pid, .. } => Event::Started { rank, pid },
            Report::RankExited { rank, pid, end, .. } => Event::Exited { rank, pid, end },
            Report::SpawnFailed { rank, reason, .. } => Event::SpawnFailed { rank, reason },
            other => Event::Server(other),
        };
        let _ = tx.send(ev);
    }
}

pub(crate) fn run(job: &Job) -> Result<i32> {
    let grace = kill_grace()?;
    let job_key: u64 = rand::random();
    let all: Vec<u32> = (0..job.ranks).collect();
    if job.dry_run {
        println!("spawner: local, {} rank(s) on this host", job.ranks);
        for r in 0..job.ranks {
            let envs = rank_env(
                r,
                job.ranks,
                job_key,
                "127.0.0.1:<port chosen at start>",
                &all,
                "localhost",
                "local",
            );
            let env_text: Vec<String> = envs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let argv: Vec<String> = std::iter::once(job.program.to_string_lossy().into_owned())
                .chain(job.args.iter().map(|a| a.to_string_lossy().into_owned()))
                .collect();
            println!(
                "rank {r} on localhost: {} {}",
                env_text.join(" "),
                argv.join(" ")
            );
        }
        return Ok(0);
    }
    let (tx, rx) = mpsc::channel();
    catch_signals(tx.clone());
    let server = BootstrapServer::start(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        job.ranks,
        0,
        job_key,
        forward_reports(tx.clone(), |_| {}),
    )?;
    let boot = server.local_addr().to_string();
    trace(job.verbose, || {
        format!("bootstrap server listening on {boot}")
    });
    let mut children = Children::default();
    let mut outputs = Outputs::new();
    let mut pids = vec![None; job.ranks as usize];
    for r in 0..job.ranks {
        let envs = rank_env(r, job.ranks, job_key, &boot, &all, "localhost", "local");
        let tx = tx.clone();
        let prefix = job.tag_output.then(|| format!("[{r}] "));
        let started = children.spawn(
            &job.program,
            &job.args,
            &envs,
            prefix,
            &mut outputs,
            None,
            Stdio::null(),
            move |pid, end| {
                let _ = tx.send(Event::Exited { rank: r, pid, end });
            },
        );
        match started {
            Ok((pid, _)) => {
                pids[r as usize] = Some(pid);
                trace(job.verbose, || format!("started rank {r} as pid {pid}"));
            }
            Err(e) => {
                children.kill();
                return Err(e.context(format!("starting rank {r}")));
            }
        }
    }
    drop(tx);
    let sup = Supervisor {
        rx,
        host_names: vec!["localhost".into()],
        rank_host: vec![0; job.ranks as usize],
        pids,
        grace,
        verbose: job.verbose,
        label: None,
        sessions: Sessions::Ssh,
    };
    let code = sup.run(&mut children);
    outputs.drain(Instant::now() + Duration::from_secs(1));
    trace(job.verbose, || format!("job ended, exit code {code}"));
    Ok(code)
}
