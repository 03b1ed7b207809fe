//! The command line (clap) and its resolution against GASNet's environment variables into a
//! [`Job`]. Command-line options win over environment variables.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;
use rgasnet_launcher::env;

use crate::plan::{self, Spawner};

const EXAMPLES: &str = "\
Examples:
  rgasnetrun -n 4 ./my_pgas_app arg1          4 ranks on this host
  rgasnetrun -n 4 --spawner ssh --hosts n1,n2 ./app    2 ranks on each of n1, n2
  rgasnetrun -n 2 --spawner mpi ./app          under mpirun (build with feature `mpi`)
  salloc -N 2 rgasnetrun -n 8 --spawner slurm ./app    srun starts an agent per node
  rgasnetrun -n 2 --dry-run ./app              show what would be started

Environment (options win): GASNET_SPAWNFN (L|S|M|slurm), GASNET_SPAWNER (local|ssh|mpi|pmi),
RGASNET_SRUN_OPTIONS, GASNET_SSH_SERVERS, GASNET_SSH_CMD,
GASNET_SSH_OPTIONS, GASNET_SSH_REMOTE_PATH, GASNET_SPAWN_VERBOSE, MPIRUN_CMD (%N %P %A %C %M %H),
RGASNET_BOOTSTRAP_HOST, RGASNET_KILL_GRACE.
Exit status: 0 when every rank exits 0; otherwise the failing rank's code (128+signal if it was
killed, the code given to abort), 2 for a bad command line, 127 for a program that cannot run.";

/// `rgasnetrun`: start an rgasnet job and supervise it.
#[derive(Parser, Debug)]
#[command(name = "rgasnetrun", version, about, after_help = EXAMPLES)]
pub(crate) struct Cli {
    /// Number of ranks (processes) to start.
    #[arg(short = 'n', long = "np", value_name = "N")]
    pub(crate) ranks: u32,
    /// Number of nodes (hosts) to spread the ranks over, in blocks (ssh, slurm, mpi).
    #[arg(short = 'N', long = "nodes", value_name = "NODES")]
    pub(crate) nodes: Option<u32>,
    /// How to start the ranks [default: GASNET_SPAWNFN, else local].
    #[arg(long, value_enum)]
    pub(crate) spawner: Option<Spawner>,
    /// Hosts for the ssh (or mpi) spawner, comma-separated [default: GASNET_SSH_SERVERS].
    #[arg(long, value_name = "H1,H2,...", conflicts_with = "hostfile")]
    pub(crate) hosts: Option<String>,
    /// File with one host per line (`#` comments).
    #[arg(long, value_name = "FILE")]
    pub(crate) hostfile: Option<PathBuf>,
    /// Environment variables to forward to every rank, comma-separated (ssh forwards these
    /// and all GASNET_*/RGASNET_* variables; local ranks inherit everything anyway).
    #[arg(
        short = 'E',
        long = "export",
        value_name = "VAR1,VAR2",
        value_delimiter = ','
    )]
    pub(crate) export: Vec<String>,
    /// Prefix every output line with `[rank] `.
    #[arg(long)]
    pub(crate) tag_output: bool,
    /// Trace every step: spawner, hosts, processes, bootstrap phases (also GASNET_SPAWN_VERBOSE=1).
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// Print what would be started (ranks, hosts, commands, environment) and exit.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM [ARGS]..."
    )]
    pub(crate) command: Vec<OsString>,
}

/// Settings of the ssh spawner.
#[derive(Debug, Clone)]
pub(crate) struct SshConfig {
    pub(crate) cmd: String,
    pub(crate) options: Vec<String>,
    pub(crate) remote_path: String,
}

/// A fully resolved job.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) ranks: u32,
    pub(crate) nodes: Option<u32>,
    pub(crate) spawner: Spawner,
    pub(crate) hosts: Vec<String>,
    /// For local jobs the resolved path; for ssh/mpi the program as given.
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
    pub(crate) export: Vec<String>,
    pub(crate) tag_output: bool,
    pub(crate) verbose: bool,
    pub(crate) dry_run: bool,
    pub(crate) ssh: SshConfig,
    pub(crate) mpirun: Option<String>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Resolves the command line against the environment.
pub(crate) fn resolve(cli: Cli) -> Result<Job> {
    if cli.ranks == 0 {
        bail!("-n 0: a job needs at least one rank (e.g. -n 2)");
    }
    let spawner = match (
        cli.spawner,
        var(env::GASNET_SPAWNFN),
        var(env::GASNET_SPAWNER),
    ) {
        (Some(s), _, _) => s,
        (None, Some(v), _) => Spawner::from_spawnfn(&v)?,
        (None, None, Some(v)) => Spawner::from_spawner_var(&v)?,
        (None, None, None) => Spawner::Local,
    };
    let hosts = if let Some(h) = &cli.hosts {
        plan::parse_host_list(h, "--hosts")?
    } else if let Some(f) = &cli.hostfile {
        let text = std::fs::read_to_string(f)
            .with_context(|| format!("cannot read hostfile {}", f.display()))?;
        plan::parse_hostfile(&text, f)?
    } else if let Some(v) = var(env::GASNET_SSH_SERVERS) {
        plan::parse_host_list(&v, env::GASNET_SSH_SERVERS)?
    } else {
        Vec::new()
    };
    let (first, rest) = cli
        .command
        .split_first()
        .context("no program given: rgasnetrun -n N PROGRAM [ARGS...]")?;
    let program = PathBuf::from(first);
    let hosts = match spawner {
        Spawner::Local => {
            if cli.nodes.is_some_and(|n| n > 1) {
                bail!(
                    "-N {} with the local spawner: local jobs run on one host; use --spawner ssh",
                    cli.nodes.unwrap_or(1)
                );
            }
            vec!["localhost".to_string()]
        }
        Spawner::Ssh => plan::select_hosts(&hosts, cli.nodes, cli.ranks)?,
        Spawner::Slurm => {
            if cli.hosts.is_some() || cli.hostfile.is_some() {
                bail!(
                    "--spawner slurm runs on the nodes of the Slurm allocation; drop --hosts/--hostfile (use -N to use fewer nodes)"
                );
            }
            crate::slurm::allocation_hosts(cli.nodes, cli.ranks)?
        }
        Spawner::Mpi => {
            if let Some(n) = cli.nodes {
                if !hosts.is_empty() && n as usize > hosts.len() {
                    bail!(
                        "-N {n} asks for more nodes than the {} host(s) given",
                        hosts.len()
                    );
                }
            }
            hosts
        }
    };
    let program = match spawner {
        Spawner::Local | Spawner::Mpi => {
            plan::resolve_program(&program, std::env::var_os("PATH").as_ref())?
        }
        // Checked on each remote host by the agent, where it must exist.
        Spawner::Ssh | Spawner::Slurm => program,
    };
    for v in &cli.export {
        if v.is_empty() || v.contains('=') || v.contains(char::is_whitespace) {
            bail!("-E {v:?}: give variable names only (e.g. -E OMP_NUM_THREADS,FOO)");
        }
    }
    let remote_path = match var(env::GASNET_SSH_REMOTE_PATH) {
        Some(p) => p,
        None => std::env::current_exe()
            .context("cannot find this executable's path; set GASNET_SSH_REMOTE_PATH")?
            .to_string_lossy()
            .into_owned(),
    };
    let ssh = SshConfig {
        cmd: var(env::GASNET_SSH_CMD).unwrap_or_else(|| "ssh".into()),
        options: var(env::GASNET_SSH_OPTIONS)
            .map(|o| o.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
        remote_path,
    };
    let verbose = cli.verbose || var(env::GASNET_SPAWN_VERBOSE).is_some_and(|v| v != "0");
    Ok(Job {
        ranks: cli.ranks,
        nodes: cli.nodes,
        spawner,
        hosts,
        program,
        args: rest.to_vec(),
        export: cli.export,
        tag_output: cli.tag_output,
        verbose,
        dry_run: cli.dry_run,
        ssh,
        mpirun: var(env::MPIRUN_CMD),
    })
}
