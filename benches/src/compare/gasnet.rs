//! An installed GASNet as an optional peer: finding its test programs (`testam`, `testsmall`,
//! `testlarge`, `testbarrier` built for the udp, smp or ibv conduit) and the way GASNet
//! launches each conduit. Whatever is missing is reported and skipped, never fatal.
//!
//! Layouts recognised under `--gasnet DIR`: `DIR/<test>-<conduit>` (GASNet's `make
//! tests-<conduit>` names when copied out), `DIR/<conduit>-conduit/<test>` (a build tree) and
//! `DIR/bin/<test>-<conduit>`.

use std::path::{Path, PathBuf};

/// GASNet conduits the comparison knows how to launch.
pub const CONDUITS: [&str; 3] = ["udp", "smp", "ibv"];

/// One GASNet test program found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerProgram {
    /// Conduit: `udp`, `smp` or `ibv`.
    pub conduit: &'static str,
    /// Benchmark name (`testam`, ...).
    pub bench: String,
    /// The executable.
    pub path: PathBuf,
}

impl PeerProgram {
    /// The comparison path name of this peer (`gasnet-udp`, ...).
    pub fn path_name(&self) -> String {
        format!("gasnet-{}", self.conduit)
    }

    /// How GASNet launches this conduit with `ranks` processes on this host: (extra
    /// arguments before the benchmark's own, environment). udp spawns itself locally
    /// (`GASNET_SPAWNFN=L`, node count as first argument) with shared memory off so that
    /// it measures its network path; smp forks `GASNET_PSHM_NODES` processes.
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
                Some(path) => this.push(PeerProgram {
                    conduit,
                    bench: (*bench).to_string(),
                    path,
                }),
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
    fn launch_settings() {
        let p = PeerProgram {
            conduit: "udp",
            bench: "testam".into(),
            path: "/x".into(),
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
        assert_eq!(bench_args("testam", 100, Some(4096)), vec!["100", "4096"]);
        assert_eq!(bench_args("testbarrier", 100, Some(4096)), vec!["100"]);
    }
}
