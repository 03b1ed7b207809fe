//! `rgasnet-bench compare`: runs the benchmark suite over every rgasnet path of this host
//! (and an installed GASNet when pointed at one), repeats, and writes the medians with their
//! min–max as a Markdown table, CSV, JSON and plots.
//!
//! A path is a way to run a job, set by the environment: `native` (the Portals engine over
//! UDP loopback between two ranks, shared memory off), `loopback` (one rank, AMs to itself),
//! `pshm` (two ranks on one supernode, through shared memory), `ref` (two ranks over a Portals
//! 4 library, `RGASNET_PORTALS=ref`: benchmarks built with `--features ref-impl`, the library
//! on `LD_LIBRARY_PATH`). Every job prints its own raw
//! baselines (UDP always; the shared-memory flag ping-pong and memcpy on the PSHM path), so
//! each path's ratios are taken against figures measured in the same run.

pub mod gasnet;
mod groups;
pub mod paired;
pub mod pairs;
pub mod plot;
pub mod probe;
pub mod runner;
pub mod summary;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use runner::Job;
use summary::Sample;

/// Every benchmark the suite knows, in running order.
pub const BENCHES: [&str; 4] = ["testam", "testsmall", "testlarge", "testbarrier"];

/// The rgasnet paths a comparison can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PathKind {
    /// Two ranks over the native Portals engine on UDP loopback, shared memory off.
    Native,
    /// One rank sending to itself.
    Loopback,
    /// Two ranks with the shared-memory path on.
    Pshm,
    /// Two ranks over a Portals 4 library (`RGASNET_PORTALS=ref`), shared memory off: the
    /// benchmarks must be built with `--features ref-impl` against the library
    /// (`PORTALS4_DIR`), found at run time through `LD_LIBRARY_PATH`. On one host the
    /// library's interface is the loopback (`PTL_IFACE_NAME=lo`) unless set.
    Ref,
}

impl PathKind {
    /// The name used in tables and file names.
    pub fn name(self) -> &'static str {
        match self {
            PathKind::Native => "native",
            PathKind::Loopback => "loopback",
            PathKind::Pshm => "pshm",
            PathKind::Ref => "ref",
        }
    }

    /// What its two ranks talk over (for pairing with GASNet's conduits).
    pub fn medium(self) -> pairs::Medium {
        match self {
            PathKind::Native | PathKind::Ref => pairs::Medium::Network,
            PathKind::Pshm => pairs::Medium::SharedMemory,
            PathKind::Loopback => pairs::Medium::OneRank,
        }
    }

    /// Ranks of the job.
    pub fn ranks(self) -> u32 {
        match self {
            PathKind::Loopback => 1,
            _ => 2,
        }
    }

    /// The environment that selects the path.
    pub fn env(self) -> Vec<(String, String)> {
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        match self {
            PathKind::Native => vec![kv("RGASNET_PSHM", "0"), kv("GASNET_SUPERNODE_MAXSIZE", "1")],
            PathKind::Loopback => vec![],
            PathKind::Pshm => vec![kv("RGASNET_PSHM", "1"), kv("GASNET_SUPERNODE_MAXSIZE", "0")],
            PathKind::Ref => {
                let iface = std::env::var("PTL_IFACE_NAME").unwrap_or_else(|_| "lo".into());
                vec![
                    kv("RGASNET_PORTALS", "ref"),
                    kv("PTL_IFACE_NAME", &iface),
                    kv("RGASNET_PSHM", "0"),
                    kv("GASNET_SUPERNODE_MAXSIZE", "1"),
                ]
            }
        }
    }
}

/// How many times `-i` the barrier benchmarks run, rgasnet's and GASNet's alike. A barrier
/// costs a few microseconds, so 3000 of them last 5-15 ms: one preemption of this 2-vCPU VM
/// moved the barrier's ratio to udp-conduit by 14 % between two compare runs (0.458 / 0.402,
/// `scripts/compare-agreement.sh`) while every other headline agreed within 10 %.
pub const BARRIER_ITERS_SCALE: u64 = 10;

/// How many times `-i` the AM benchmarks run, rgasnet's and GASNet's alike. 3000 AM Short
/// round trips last 0.6 ms through shared memory and 20-30 ms over UDP; alternating single
/// jobs at 3000 gave udp-conduit / native ratios of 0.66-0.86 and at 15,000 of 0.83-0.96
/// (2026-12-02), and two compare runs disagreed by 12-17 % on AM Short (network and shared
/// memory) with every repeat's jobs in one machine state. The sweeps to 1 MiB cost about a
/// minute more per compare run.
pub const AM_ITERS_SCALE: u64 = 5;

/// Bytes that rgasnet's benchmarks may move per message size in compare (`--byte-budget`).
/// GASNet's tests run every size `iters` times; rgasnet's cap a size at their byte budget
/// (32 MiB by default, so that a sweep to many MiB stays short), which measured a 1 MiB put
/// over 32 iterations, about 3 ms, against udp-conduit's 3000: the 1 MiB headlines moved by
/// 19-25 % between two compare runs (stops 54 and 56) and a 1 MiB AM Long flood read 3.3 GB/s
/// over 32 iterations against 7.6 GB/s over 15,000. With 1 GiB every size up to 64 KiB runs
/// all its iterations and 1 MiB runs 1024 of them, 0.1-0.3 s.
pub const BYTE_BUDGET: u64 = 1 << 30;

/// The iterations `bench` runs when compare is given `iters`: [`BARRIER_ITERS_SCALE`] times
/// as many for `testbarrier`, [`AM_ITERS_SCALE`] times for `testam`, `iters` for the others
/// (testsmall at five times `-i` was tried in stop 57's agreement check and not kept: its
/// sizes then moved together within a job, but the repeats still spread by 0.62-1.04 × and the
/// compare run took twice as long; see benches/perf/agreement.md).
pub fn bench_iters(bench: &str, iters: u64) -> u64 {
    match bench {
        "testbarrier" => iters.saturating_mul(BARRIER_ITERS_SCALE),
        "testam" => iters.saturating_mul(AM_ITERS_SCALE),
        _ => iters,
    }
}

/// Options of `rgasnet-bench compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// Paths to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "native,pshm,loopback"
    )]
    pub paths: Vec<PathKind>,
    /// Benchmarks to run, comma-separated [default: every one of testam, testsmall,
    /// testlarge, testbarrier whose binary is built].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(BENCHES))]
    pub benches: Option<Vec<String>>,
    /// Runs of every (benchmark, path). Eleven: a headline ratio is the median of the ratios
    /// within the repeats, and on this project's 2-vCPU VM those ratios spread by 7-15 % (sd
    /// of their log; the shared-memory AM Short's, a 0.2 µs round trip, by 32 %) from job to
    /// job, whatever the iteration count. Drawn from the repeats of seven agreement checks
    /// (`scripts/agreement_odds.py`), two runs of 5 repeats agree within 10 % on all eight
    /// headlines about one time in three, of 11 about five times in six
    /// (benches/perf/agreement.md). A run takes about half an hour there; `--repeats 3`
    /// gives a quick look.
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u64).range(1..))]
    pub repeats: u64,
    /// Iterations per measurement, passed to every benchmark (and to GASNet's; the barrier
    /// and AM benchmarks run `BARRIER_ITERS_SCALE` and `AM_ITERS_SCALE` times as many, see
    /// [`bench_iters`]). 3000: at 500 an 8-byte latency or a barrier was measured over 1-2
    /// ms, which one preemption on a shared VM moves by tens of percent (two compare runs then
    /// disagreed by 10-15 % on the 8-byte get and the barrier); the history of the agreement
    /// checks (`scripts/compare-agreement.sh`) is in benches/perf/agreement.md.
    #[arg(short = 'i', long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: u64,
    /// Largest message size of the sweeps (K/M/G suffixes).
    #[arg(long, default_value = "1M", value_parser = crate::opts::parse_size)]
    pub max_size: usize,
    /// Directory for the table, CSV, JSON, plots and logs.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// An installed GASNet whose testam/testsmall/testlarge/testbarrier (udp, smp, ibv
    /// builds) run as peers; missing or partial: reported and skipped.
    #[arg(long, value_name = "DIR")]
    pub gasnet: Option<PathBuf>,
    /// Where `rgasnetrun` and the benchmark binaries are [default: next to this program].
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Longest one job may run (seconds) before it is stopped and reported.
    #[arg(long, default_value_t = 120)]
    pub timeout_secs: u64,
    /// Extra arguments for rgasnet's benchmarks (one string, split at spaces); an option
    /// given here overrides compare's own `--max-size` and `--byte-budget`.
    #[arg(long, allow_hyphen_values = true, value_name = "ARGS")]
    pub bench_args: Option<String>,
    /// Skip the plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Times a pair of jobs of one repeat (rgasnet's path and a GASNet peer on the same
    /// medium) runs again when the probes around it place its two jobs in different machine
    /// states: the job that did not run in the machine's present state (see
    /// `rgasnet_bench::compare::pairs`). A job's last run counts either way.
    #[arg(long, default_value_t = 2)]
    pub state_retries: u32,
}

/// What stops a comparison from running at all (anything smaller is reported and skipped).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    /// The launcher is not where the binaries are.
    #[error("rgasnetrun not found at {0} (build it: cargo build --release -p rgasnet-launcher, or pass --bin-dir)")]
    NoLauncher(PathBuf),
    /// None of the asked-for benchmarks is built.
    #[error("no benchmark binary found in {dir} ({}); build them: cargo build --release -p rgasnet-bench", .skipped.join("; "))]
    NoBenchmarks {
        /// Where they were looked for.
        dir: PathBuf,
        /// Why each was skipped.
        skipped: Vec<String>,
    },
    /// The output directory could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Cannot tell where this program is.
    #[error("cannot locate this program's directory ({0}); pass --bin-dir")]
    NoExeDir(String),
}

/// What a comparison produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The summarised rows.
    pub rows: Vec<summary::Row>,
    /// Everything skipped or failed, one message each.
    pub skipped: Vec<String>,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// The Markdown report.
    pub markdown: String,
}

/// One job of the plan.
struct Planned {
    job: Job,
    path: String,
    bench: String,
    run: usize,
    /// Which jobs of its group it is compared with.
    role: pairs::Role,
}

fn write(path: &Path, text: &[u8]) -> Result<(), CompareError> {
    std::fs::write(path, text).map_err(|source| CompareError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Runs the comparison; progress goes to standard error.
pub fn compare(args: &CompareArgs) -> Result<Outcome, CompareError> {
    let bin_dir = match &args.bin_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .ok_or_else(|| CompareError::NoExeDir("current_exe failed".into()))?,
    };
    let launcher = bin_dir.join("rgasnetrun");
    if !launcher.is_file() {
        return Err(CompareError::NoLauncher(launcher));
    }
    let mut skipped = Vec::new();
    let wanted: Vec<String> = args
        .benches
        .clone()
        .unwrap_or_else(|| BENCHES.iter().map(|s| s.to_string()).collect());
    let mut benches = Vec::new();
    for b in &wanted {
        let p = bin_dir.join(b);
        if p.is_file() {
            benches.push((b.clone(), p));
        } else {
            skipped.push(format!("{b}: not built ({} missing): skipped", p.display()));
        }
    }
    if benches.is_empty() {
        return Err(CompareError::NoBenchmarks {
            dir: bin_dir,
            skipped,
        });
    }
    let timeout = Duration::from_secs(args.timeout_secs);
    // --bench-args come last: rgasnet's benchmarks take the last of an option given twice, so
    // they override these.
    let mut bench_args = vec![
        "--max-size".to_string(),
        args.max_size.to_string(),
        "--byte-budget".to_string(),
        BYTE_BUDGET.to_string(),
    ];
    if let Some(extra) = &args.bench_args {
        bench_args.extend(extra.split_whitespace().map(String::from));
    }
    let peers = match &args.gasnet {
        Some(dir) => {
            let names: Vec<&str> = benches.iter().map(|(b, _)| b.as_str()).collect();
            let (found, why) = gasnet::discover(dir, &names, gasnet::has_infiniband());
            skipped.extend(why);
            found
        }
        None => Vec::new(),
    };
    let mut plan = Vec::new();
    // Repetitions outermost, so that a change in the machine's load over the session spreads
    // over every path instead of biasing one; within a repeat, each benchmark runs on every
    // path and peer back to back, each of rgasnet's paths next to the peers it is compared
    // with, in an order that rotates from one repeat to the next (`pairs::arrangement`), so
    // that the figures compared were measured seconds apart and no path always comes first.
    for run in 0..args.repeats as usize {
        for (bench, exe) in &benches {
            let mut group = Vec::new();
            for path in &args.paths {
                let mut a = vec!["-n".to_string(), path.ranks().to_string(), "--".into()];
                a.push(exe.display().to_string());
                a.extend(["-i".to_string(), bench_iters(bench, args.iters).to_string()]);
                a.extend(bench_args.iter().cloned());
                group.push(Planned {
                    job: Job {
                        program: launcher.clone(),
                        args: a,
                        env: path.env(),
                        timeout,
                    },
                    path: path.name().into(),
                    bench: bench.clone(),
                    run,
                    role: pairs::Role {
                        medium: path.medium(),
                        peer: false,
                    },
                });
            }
            for p in peers.iter().filter(|p| &p.bench == bench) {
                let (program, mut a, env) = p.command(2);
                a.extend(gasnet::bench_args(
                    &p.bench,
                    bench_iters(&p.bench, args.iters),
                    Some(args.max_size),
                ));
                group.push(Planned {
                    job: Job {
                        program,
                        args: a,
                        env,
                        timeout,
                    },
                    path: p.path_name(),
                    bench: p.bench.clone(),
                    run,
                    role: pairs::Role {
                        medium: p.medium(),
                        peer: true,
                    },
                });
            }
            if !group.is_empty() {
                let roles: Vec<pairs::Role> = group.iter().map(|p| p.role).collect();
                let mut slots: Vec<Option<Planned>> = group.into_iter().map(Some).collect();
                let arranged = pairs::arrangement(&roles, run)
                    .into_iter()
                    .filter_map(|i| slots.get_mut(i).and_then(Option::take))
                    .collect();
                plan.push(arranged);
            }
        }
    }
    let logs = args.out.join("logs");
    std::fs::create_dir_all(&logs).map_err(|source| CompareError::Write {
        path: logs.clone(),
        source,
    })?;
    let started = Instant::now();
    let done = groups::run_all(&plan, args, &logs)?;
    skipped.extend(done.skipped);
    eprintln!("all runs done in {:.1} s", started.elapsed().as_secs_f64());
    let commands = done.commands;
    let samples = done.samples;
    let states = done.states;
    let roles: pairs::Roles = plan
        .iter()
        .flatten()
        .map(|p| (p.path.clone(), p.role))
        .collect();
    finish(args, samples, &states, &roles, skipped, &commands)
}

/// Aggregates, writes the files and builds the Markdown report.
fn finish(
    args: &CompareArgs,
    samples: Vec<Sample>,
    states: &paired::JobStates,
    roles: &pairs::Roles,
    mut skipped: Vec<String>,
    commands: &[String],
) -> Result<Outcome, CompareError> {
    let rows = summary::aggregate(&samples);
    let mut files = Vec::new();
    if !args.no_plots {
        for (chart, stem) in [
            (plot::latency_chart(&rows), "latency"),
            (plot::bandwidth_chart(&rows), "bandwidth"),
        ] {
            match plot::write_chart(&chart, &args.out.join(stem)) {
                Ok(f) => files.extend(f),
                Err(e) => skipped.push(format!("plot {stem}: {e}")),
            }
        }
    }
    let machine = machine_description();
    let date = utc_date(SystemTime::now());
    let table = summary::markdown_table(&rows, roles);
    let mut md = format!(
        "# rgasnet benchmark comparison\n\nDate (UTC): {date}  \nMachine: {machine}  \n\
         Runs: {} per benchmark and path; figures are medians with min–max over the runs.\n\n\
         Iterations: {} per measurement, {} per AM and {} per barrier benchmark; rgasnet's \
         benchmarks move at most {} MiB per size.  \n\
         Reproduce: `rgasnet-bench compare --repeats {} -i {} --max-size {}`\n\n",
        args.repeats,
        args.iters,
        bench_iters("testam", args.iters),
        bench_iters("testbarrier", args.iters),
        BYTE_BUDGET >> 20,
        args.repeats,
        args.iters,
        args.max_size
    );
    md.push_str(&table);
    if !skipped.is_empty() {
        md.push_str("\n## Skipped or failed\n\n");
        for s in &skipped {
            md.push_str(&format!("- {s}\n"));
        }
    }
    md.push_str("\n## Commands (first run of each)\n\n");
    for c in commands {
        md.push_str(&format!("- `{c}`\n"));
    }
    let md_path = args.out.join("results.md");
    write(&md_path, md.as_bytes())?;
    let csv_path = args.out.join("results.csv");
    write(&csv_path, summary::csv(&rows).as_bytes())?;
    let paired_path = args.out.join("peer_ratios.csv");
    write(
        &paired_path,
        paired::csv(&paired::paired_ratios(&samples, states, roles)).as_bytes(),
    )?;
    let json_path = args.out.join("results.json");
    let meta = [
        ("date_utc", date),
        ("machine", machine),
        ("repeats", args.repeats.to_string()),
        ("iters", args.iters.to_string()),
        ("max_size", args.max_size.to_string()),
    ];
    write(&json_path, summary::json(&rows, &meta, &skipped).as_bytes())?;
    files.splice(0..0, [md_path, csv_path, paired_path, json_path]);
    Ok(Outcome {
        rows,
        skipped,
        files,
        markdown: md,
    })
}

fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// CPU model, core count, kernel and host name, from /proc.
pub fn machine_description() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{} ({cores} cores), Linux {}, host {}",
        cpu.unwrap_or_else(|| "unknown CPU".into()),
        read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "?".into()),
        read_trim("/proc/sys/kernel/hostname").unwrap_or_else(|| "?".into()),
    )
}

/// `YYYY-MM-DD HH:MM` in UTC.
pub fn utc_date(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    // Civil date from days since 1970-01-01 (proleptic Gregorian, eras of 400 years).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: CompareArgs,
    }

    #[test]
    fn dates() {
        let at = |s| utc_date(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01 00:00");
        assert_eq!(at(951_782_400), "2000-02-29 00:00");
        assert_eq!(at(1_700_000_000), "2023-11-14 22:13");
    }

    #[test]
    fn options() {
        let t = T::try_parse_from(["x"]).unwrap();
        assert_eq!(
            t.a.paths,
            vec![PathKind::Native, PathKind::Pshm, PathKind::Loopback]
        );
        assert_eq!(t.a.repeats, 11);
        assert_eq!(t.a.max_size, 1 << 20);
        let t = T::try_parse_from([
            "x",
            "--paths",
            "pshm",
            "--benches",
            "testam,testbarrier",
            "--bench-args",
            "--no-baseline",
        ])
        .unwrap();
        assert_eq!(t.a.paths, vec![PathKind::Pshm]);
        assert_eq!(
            t.a.benches,
            Some(vec!["testam".to_string(), "testbarrier".to_string()])
        );
        assert!(T::try_parse_from(["x", "--benches", "testfoo"]).is_err());
        assert!(T::try_parse_from(["x", "--paths", "infiniband"]).is_err());
        assert!(T::try_parse_from(["x", "--repeats", "0"]).is_err());
        assert_eq!(
            PathKind::Native.env()[0],
            ("RGASNET_PSHM".to_string(), "0".to_string())
        );
        assert_eq!(PathKind::Loopback.ranks(), 1);
        let t = T::try_parse_from(["x", "--paths", "native,ref"]).unwrap();
        assert_eq!(t.a.paths, vec![PathKind::Native, PathKind::Ref]);
        let env = PathKind::Ref.env();
        assert_eq!(env[0], ("RGASNET_PORTALS".to_string(), "ref".to_string()));
        assert!(env.contains(&("RGASNET_PSHM".to_string(), "0".to_string())));
        assert_eq!(PathKind::Ref.ranks(), 2);
    }

    #[test]
    fn missing_launcher_and_gasnet_dir() {
        let dir = std::env::temp_dir().join(format!("rgasnet-cmp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = T::try_parse_from(["x"]).unwrap().a;
        a.bin_dir = Some(dir.clone());
        a.out = dir.join("out");
        assert!(matches!(compare(&a), Err(CompareError::NoLauncher(_))));
        // A launcher but no benchmark binary.
        std::fs::write(dir.join("rgasnetrun"), "").unwrap();
        match compare(&a) {
            Err(CompareError::NoBenchmarks { skipped, .. }) => {
                assert_eq!(skipped.len(), 4);
                assert!(skipped[0].starts_with("testam: not built"));
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
