//! `rgasnet-bench compare --paths native,ref` with the benchmarks built with `--features
//! ref-impl`: the `ref` path (`RGASNET_PORTALS=ref`, over the Portals 4 library that
//! `PORTALS4_DIR` built against) runs beside the native one, each against the raw baseline of
//! its own jobs. `scripts/test.sh` runs it over rgasnet's own libportals. No timing is
//! asserted: only that every figure of both paths is there.
#![cfg(feature = "ref-impl")]
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

#[test]
fn compare_runs_the_ref_path_beside_the_native_one() {
    let bin_dir = PathBuf::from(env!("CARGO_BIN_EXE_testam"))
        .parent()
        .unwrap()
        .to_path_buf();
    if !bin_dir.join("rgasnetrun").exists() {
        let mut build = Command::new(env!("CARGO"));
        build.args([
            "build",
            "-q",
            "-p",
            "rgasnet-launcher",
            "--bin",
            "rgasnetrun",
        ]);
        if bin_dir.ends_with("release") {
            build.arg("--release");
        }
        assert!(build.status().unwrap().success(), "building rgasnetrun");
    }
    let out = std::env::temp_dir().join(format!("rgasnet-ref-compare-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_rgasnet-bench"))
        .args([
            "compare",
            "--paths",
            "native,ref",
            "--benches",
            "testam,testsmall",
        ])
        .args([
            "--repeats",
            "1",
            "-i",
            "50",
            "--max-size",
            "4K",
            "--no-plots",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--bin-dir")
        .arg(&bin_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    for job in [
        "testam on ref (run 1 of 1)",
        "testsmall on ref (run 1 of 1)",
    ] {
        assert!(stderr.contains(job), "{job}: {stderr}");
    }
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    // Each path's rows, with the ratio to the raw UDP round trip of its own jobs.
    for path in ["native", "ref"] {
        for figure in [
            "| AMShort ping-pong roundtrip ReqRep |  | ",
            "| put latency | 8 | ",
        ] {
            let row = format!("{figure}{path} |");
            let line = md.lines().find(|l| l.starts_with(&row));
            assert!(
                line.is_some_and(|l| l.contains("raw udp 8 B rtt")),
                "{row}\n{md}"
            );
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}
