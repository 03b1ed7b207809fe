//! The mpi spawner: the job runs under `mpirun`, whose processes bootstrap through MPI (the
//! conduit's `Bootstrap::from_env` with feature `mpi`). The launcher builds the command from
//! `MPIRUN_CMD` (or a default for Open MPI), runs it and passes its exit status on.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;

use anyhow::{Context, Result};
use nix::sys::signal::Signal;

use crate::cli::Job;
use crate::job::{catch_signals, trace, Event, Fleet, Sessions, Supervisor};
use crate::plan::{expand_template, resolve_program, TemplateArgs};
use crate::procs::{kill_grace, Children, Outputs};

/// Open MPI's mpirun, kept to this machine's loopback and shared memory unless the user's
/// template says otherwise.
const DEFAULT_TEMPLATE: &str = "mpirun --oversubscribe -np %N %C";

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The argv of the mpirun command.
fn mpirun_argv(job: &Job, hostfile: Option<&str>) -> Result<Vec<String>> {
    let args: Vec<String> = job
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let program = job.program.to_string_lossy().into_owned();
    let nodes = job.nodes.unwrap_or(job.hosts.len().max(1) as u32);
    let t = TemplateArgs {
        ranks: job.ranks,
        nodes,
        program: &program,
        args: &args,
        hostfile,
    };
    let custom = job.mpirun.is_some();
    let template = job.mpirun.as_deref().unwrap_or(DEFAULT_TEMPLATE);
    let mut argv = expand_template(template, &t)?;
    if !custom {
        // Flags only Open MPI understands, so only for the default template.
        let mut extra: Vec<String> = Vec::new();
        if is_root() {
            extra.push("--allow-run-as-root".into());
        }
        if job.tag_output {
            extra.push("--tag-output".into());
        }
        if hostfile.is_some() {
            extra.push("--hostfile".into());
            extra.push(hostfile.unwrap_or_default().to_string());
        }
        for v in &job.export {
            extra.push("-x".into());
            extra.push(v.clone());
        }
        argv.splice(1..1, extra);
    }
    Ok(argv)
}

impl Fleet for (Children, ()) {
    fn terminate(&mut self) {
        self.0.signal_all(Signal::SIGTERM);
    }
    fn kill(&mut self) {
        self.0.signal_all(Signal::SIGKILL);
    }
    fn all_gone(&self) -> bool {
        self.0.running() == 0
    }
}

pub(crate) fn run(job: &Job) -> Result<i32> {
    let hostfile = if job.hosts.is_empty() {
        None
    } else {
        let dir = std::env::temp_dir().join(format!("rgasnetrun-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join("hostfile");
        let mut f = std::fs::File::create(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        for h in &job.hosts {
            writeln!(f, "{h}")?;
        }
        Some(path.to_string_lossy().into_owned())
    };
    let argv = mpirun_argv(job, hostfile.as_deref())?;
    let (cmd, rest) = argv.split_first().context("MPIRUN_CMD is empty")?;
    let mpirun =
        resolve_program(Path::new(cmd), std::env::var_os("PATH").as_ref()).map_err(|e| {
            e.context(format!(
            "{cmd} cannot run; install Open MPI (`apt-get install openmpi-bin`) or set MPIRUN_CMD"
        ))
        })?;
    if job.dry_run {
        println!("spawner: mpi, {} rank(s)", job.ranks);
        println!("{} {}", mpirun.display(), rest.join(" "));
        return Ok(0);
    }
    trace(job.verbose, || {
        format!("running {} {}", mpirun.display(), rest.join(" "))
    });
    let (tx, rx) = mpsc::channel();
    catch_signals(tx.clone());
    let mut envs = Vec::new();
    if is_root() {
        envs.push(("OMPI_ALLOW_RUN_AS_ROOT".to_string(), "1".to_string()));
        envs.push((
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM".to_string(),
            "1".to_string(),
        ));
    }
    let children = Children::default();
    let mut outputs = Outputs::new();
    let args: Vec<std::ffi::OsString> = rest.iter().map(Into::into).collect();
    let tx2 = tx.clone();
    let (pid, _) = children.spawn(
        &mpirun,
        &args,
        &envs,
        None,
        &mut outputs,
        None,
        Stdio::null(),
        move |pid, end| {
            let _ = tx2.send(Event::Exited { rank: 0, pid, end });
        },
    )?;
    drop(tx);
    let sup = Supervisor {
        rx,
        host_names: vec!["mpirun".into()],
        rank_host: vec![0],
        pids: vec![Some(pid)],
        grace: kill_grace()?,
        verbose: job.verbose,
        label: Some("mpirun"),
        sessions: Sessions::Ssh,
    };
    let mut fleet = (children, ());
    let code = sup.run(&mut fleet);
    outputs.drain(std::time::Instant::now() + std::time::Duration::from_secs(1));
    if let Some(h) = hostfile {
        let _ = std::fs::remove_file(&h);
    }
    Ok(code)
}
