//! An installed GASNet as an optional peer: finding its test programs (`testam`, `testsmall`,
//! `testlarge`, `testbarrier` built for the udp, smp, ibv or rgasnet conduit) and the way GASNet
//! launches each conduit, and reading GASNet-EX's labels as rgasnet's figures. Whatever is
//! missing is reported and skipped, never fatal.
//!
//! Layouts recognised under `--gasnet DIR`: `DIR/<test>-<conduit>` (GASNet's `make
//! tests-<conduit>` names when copied out), `DIR/<conduit>-conduit/<test>` (a build tree, such as
//! `scripts/gasnet-ex.sh`'s `DIR/build`) and `DIR/bin/<test>-<conduit>`. The rgasnet conduit's
//! programs start through its `contrib/gasnetrun_rgasnet`, found next to them in a build tree.

use std::path::{Path, PathBuf};

/// GASNet conduits the comparison knows how to launch.
pub const CONDUITS: [&str; 4] = ["udp", "smp", "ibv", "rgasnet"];

/// rgasnet's figure for a GASNet-EX label of `bench` (GASNet-EX names its put/get rows after
/// its API: `PutBlocking latency` is testsmall's `put latency` and testlarge's `put_bulk
/// throughput`); any other label (GASNet-1's, AMs, barriers) is already rgasnet's.
pub fn canonical_figure(bench: &str, figure: &str) -> String {
    const SMALL: [(&str, &str); 12] = [
        ("PutBlocking latency", "put latency"),
        ("GetBlocking latency", "get latency"),
        ("PutNB+NOW latency", "put_nb latency"),
        ("GetNB latency", "get_nb latency"),
        ("PutNBI+NOW latency", "put_nbi latency"),
        ("GetNBI latency", "get_nbi latency"),
        ("PutBlocking throughput", "put throughput"),
        ("GetBlocking throughput", "get throughput"),
        ("PutNB+NOW throughput", "put_nb throughput"),
        ("GetNB throughput", "get_nb throughput"),
        ("PutNBI+NOW throughput", "put_nbi throughput"),
        ("GetNBI throughput", "get_nbi throughput"),
    ];
    // Bulk transfers: the source is the caller's again only at sync (GASNet-EX's DEFER).
    const LARGE: [(&str, &str); 6] = [
        ("PutBlocking throughput", "put_bulk throughput"),
        ("GetBlocking throughput", "get_bulk throughput"),
        ("PutNB+DEFER throughput", "put_nb_bulk throughput"),
        ("GetNB throughput", "get_nb_bulk throughput"),
        ("PutNBI+DEFER throughput", "put_nbi_bulk throughput"),
        ("GetNBI throughput", "get_nbi_bulk throughput"),
    ];
    let table: &[(&str, &str)] = if bench == "testlarge" { &LARGE } else { &SMALL };
    table
        .iter()
        .find(|(ex, _)| *ex == figure)
        .map_or_else(|| figure.to_string(), |(_, ours)| (*ours).to_string())
}

/// One GASNet test program found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerProgram {
    /// Conduit: `udp`, `smp`, `ibv` or `rgasnet`.
    pub conduit: &'static str,
    /// Benchmark name (`testam`, ...).
    pub bench: String,
    /// The executable.
    pub path: PathBuf,
    /// The conduit's launcher when the program does not spawn itself
    /// (`contrib/gasnetrun_rgasnet`).
    pub runner: Option<PathBuf>,
}

impl PeerProgram {
    /// The comparison path name of this peer (`gasnet-udp`, ...).
    pub fn path_name(&self) -> String {
        format!("gasnet-{}", self.conduit)
    }

    /// What its two ranks talk over as compare runs it: smp through shared memory, the others
    /// (udp, ibv, and rgasnet with `GASNET_SUPERNODE_MAXSIZE=1`) over the network.
    pub fn medium(&self) -> super::pairs::Medium {
        if self.conduit == "smp" {
            super::pairs::Medium::SharedMemory
        } else {
            super::pairs::Medium::Network
        }
    }

    /// How GASNet launches this conduit with `ranks` processes on this host: (the program to
    /// start, its arguments before the benchmark's own, environment). udp spawns itself
    /// locally (`GASNET_SPAWNFN=L`, node count as first argument) with shared memory off so
    /// that it measures its network path; smp forks `GASNET_PSHM_NODES` processes; rgasnet
    /// starts through `gasnetrun_rgasnet -n N`, shared memory off as for udp.
    pub fn command(&self, ranks: u32) -> (PathBuf, Vec<String>, Vec<(String, String)>) {
        let (mut args, env) = self.launch(ranks);
        match &self.runner {
            Some(runner) => {
                let mut a = vec!["-n".to_string(), ranks.to_string()];
                a.push(self.path.display().to_string());
                a.append(&mut args);
                (runner.clone(), a, env)
            }
            None => (self.path.clone(), args, env),
        }
    }

    /// The arguments and environment of [`PeerProgram::command`], before the program.
    pub fn launch(&self, ranks: u32) -> (Vec<String>, Vec<(String, String)>) {
        match self.conduit {
            "udp" => (
                vec![ranks.to_string()],
                vec![
                    ("GASNET_SPAWNFN".into(), "L".into()),
                    ("GASNET_SUPERNODE_MAXSIZE".into(), "1".into()),
                ],
            ),
            "smp" => (
                vec![],
                vec![("GASNET_PSHM_NODES".into(), ranks.to_string())],
            ),
            "rgasnet" => (
                vec![],
                vec![("GASNET_SUPERNODE_MAXSIZE".into(), "1".into())],
            ),
            _ => (vec![], vec![]),
        }
    }
}

/// GASNet's positional arguments for `bench`: `(iters) (maxsz)`, testbarrier `(iters)`.
pub fn bench_args(bench: &str, iters: u64, max_size: Option<usize>) -> Vec<String> {
    let mut v = vec![iters.to_string()];
    if bench != "testbarrier" {
        if let Some(m) = max_size {
            v.push(m.to_string());
        }
    }
    v
}

fn candidates(dir: &Path, bench: &str, conduit: &str) -> [PathBuf; 3] {
    [
        dir.join(format!("{bench}-{conduit}")),
        dir.join(format!("{conduit}-conduit")).join(bench),
        dir.join("bin").join(format!("{bench}-{conduit}")),
    ]
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether this host has InfiniBand devices (ibv programs are run only then).
pub fn has_infiniband() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

/// The programs found under `dir` for `benches`, and one message per thing skipped.
pub fn discover(dir: &Path, benches: &[&str], infiniband: bool) -> (Vec<PeerProgram>, Vec<String>) {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    if !dir.is_dir() {
        skipped.push(format!(
            "gasnet: {} is not a directory: GASNet peer skipped",
            dir.display()
        ));
        return (found, skipped);
    }
    for conduit in CONDUITS {
        let mut this: Vec<PeerProgram> = Vec::new();
        let mut missing = Vec::new();
        for bench in benches {
            match candidates(dir, bench, conduit)
                .into_iter()
                .find(|p| is_executable(p))
            {
                Some(path) => {
                    let runner = (conduit == "rgasnet").then(|| {
                        path.parent()
                            .unwrap_or(dir)
                            .join("contrib")
                            .join("gasnetrun_rgasnet")
                    });
                    if runner.as_ref().is_some_and(|r| !is_executable(r)) {
                        missing.push(*bench);
                        continue;
                    }
                    this.push(PeerProgram {
                        conduit,
                        bench: (*bench).to_string(),
                        path,
                        runner,
                    });
                }
                None => missing.push(*bench),
            }
        }
        if this.is_empty() {
            continue;
        }
        if conduit == "ibv" && !infiniband {
            skipped.push(format!(
                "gasnet-ibv: {} program(s) found but this host has no InfiniBand device: skipped",
                this.len()
            ));
            continue;
        }
        for m in missing {
            skipped.push(format!(
                "gasnet-{conduit}: {m} not found in {} (looked for {m}-{conduit}, {conduit}-conduit/{m}, bin/{m}-{conduit}): skipped",
                dir.display()
            ));
        }
        found.extend(this);
    }
    if found.is_empty() && skipped.is_empty() {
        skipped.push(format!(
            "gasnet: no GASNet test program for {} in {} (looked for <test>-<conduit>, <conduit>-conduit/<test>, bin/<test>-<conduit> with conduits {}): GASNet peer skipped",
            benches.join(", "),
            dir.display(),
            CONDUITS.join(", ")
        ));
    }
    (found, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rgasnet-gasnet-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn exe(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    const ALL: [&str; 4] = ["testam", "testsmall", "testlarge", "testbarrier"];

    #[test]
    fn missing_directory_is_reported_and_skipped() {
        let (found, skipped) = discover(Path::new("/nonexistent/gasnet"), &ALL, false);
        assert!(found.is_empty());
        assert_eq!(
            skipped,
            vec!["gasnet: /nonexistent/gasnet is not a directory: GASNet peer skipped".to_string()]
        );
    }

    #[test]
    fn empty_directory_is_reported_and_skipped() {
        let d = tmp("empty");
        let (found, skipped) = discover(&d, &ALL, false);
        assert!(found.is_empty());
        assert_eq!(skipped.len(), 1);
        assert!(
            skipped[0].starts_with("gasnet: no GASNet test program for testam, testsmall"),
            "{}",
            skipped[0]
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn partial_directory_runs_what_exists_and_names_the_rest() {
        let d = tmp("partial");
        exe(&d.join("testam-udp"));
        exe(&d.join("smp-conduit").join("testsmall"));
        exe(&d.join("bin").join("testam-ibv"));
        // Not executable: does not count.
        std::fs::write(d.join("testlarge-udp"), "x").unwrap();
        let (found, skipped) = discover(&d, &ALL, false);
        let names: Vec<(String, String)> = found
            .iter()
            .map(|p| (p.path_name(), p.bench.clone()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("gasnet-udp".to_string(), "testam".to_string()),
                ("gasnet-smp".to_string(), "testsmall".to_string())
            ]
        );
        assert_eq!(found[1].path, d.join("smp-conduit").join("testsmall"));
        assert_eq!(skipped.len(), 3 + 3 + 1, "{skipped:#?}");
        assert!(skipped
            .iter()
            .any(|s| s.starts_with("gasnet-udp: testlarge not found")));
        assert!(skipped
            .iter()
            .any(|s| s.starts_with("gasnet-smp: testam not found")));
        assert!(skipped.iter().any(
            |s| s.starts_with("gasnet-ibv: 1 program(s) found but this host has no InfiniBand")
        ));
        let (_, skipped) = discover(&d, &ALL, true);
        assert!(skipped
            .iter()
            .any(|s| s.starts_with("gasnet-ibv: testsmall not found")));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn gasnet_ex_labels_read_as_rgasnet_figures() {
        assert_eq!(
            canonical_figure("testsmall", "PutBlocking latency"),
            "put latency"
        );
        assert_eq!(
            canonical_figure("testsmall", "GetNB latency"),
            "get_nb latency"
        );
        assert_eq!(
            canonical_figure("testlarge", "PutBlocking throughput"),
            "put_bulk throughput"
        );
        assert_eq!(
            canonical_figure("testlarge", "GetNB throughput"),
            "get_nb_bulk throughput"
        );
        // GASNet-1's labels and everything else stay as they are.
        assert_eq!(canonical_figure("testsmall", "put latency"), "put latency");
        assert_eq!(
            canonical_figure("testbarrier", "Named Barrier"),
            "Named Barrier"
        );
    }

    #[test]
    fn launch_settings() {
        let p = PeerProgram {
            conduit: "udp",
            bench: "testam".into(),
            path: "/x".into(),
            runner: None,
        };
        let (args, env) = p.launch(2);
        assert_eq!(args, vec!["2"]);
        assert!(env.contains(&("GASNET_SPAWNFN".into(), "L".into())));
        let p = PeerProgram {
            conduit: "smp",
            ..p
        };
        assert_eq!(
            p.launch(2).1,
            vec![("GASNET_PSHM_NODES".to_string(), "2".to_string())]
        );
        let r = PeerProgram {
            conduit: "rgasnet",
            runner: Some("/b/rgasnet-conduit/contrib/gasnetrun_rgasnet".into()),
            path: "/b/rgasnet-conduit/testam".into(),
            ..p.clone()
        };
        let (prog, args, env) = r.command(2);
        assert_eq!(
            prog,
            PathBuf::from("/b/rgasnet-conduit/contrib/gasnetrun_rgasnet")
        );
        assert_eq!(args, vec!["-n", "2", "/b/rgasnet-conduit/testam"]);
        assert_eq!(
            env,
            vec![("GASNET_SUPERNODE_MAXSIZE".to_string(), "1".to_string())]
        );
        assert_eq!(bench_args("testam", 100, Some(4096)), vec!["100", "4096"]);
        assert_eq!(bench_args("testbarrier", 100, Some(4096)), vec!["100"]);
    }
}
