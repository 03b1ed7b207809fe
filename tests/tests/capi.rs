//! The C ABI from C: `tests/c/capi_job.c`, compiled against `capi/include/rgasnet.h` and the
//! static library (C11, `-Wall -Wextra -Werror`), runs under `rgasnetrun` on 2 and 3 ranks,
//! once as built and once under AddressSanitizer. The program checks every result itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rgasnet_tests::{capi_static_lib, run_job};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf()
}

/// Compiles the C job with `extra` flags into the test's temporary directory.
fn compile(name: &str, extra: &[&str]) -> PathBuf {
    let root = repo();
    let lib = capi_static_lib();
    let out = std::env::temp_dir().join(format!("rgasnet-capi-{}-{name}", std::process::id()));
    let st = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g"])
        .args(extra)
        .arg("-I")
        .arg(root.join("capi/include"))
        .arg(root.join("tests/c/capi_job.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(&out)
        .status()
        .expect("run cc");
    assert!(st.success(), "compiling tests/c/capi_job.c ({name}) failed");
    out
}

fn run(prog: &Path, ranks: u32, env: &[(&str, &str)]) {
    let out = run_job(ranks, prog, &[], env, Duration::from_secs(120));
    out.assert_success();
    assert_eq!(
        out.stdout.matches("capi_job: rank").count(),
        ranks as usize,
        "every rank must report ok:\n{}\n{}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn c_job_over_the_c_abi() {
    let prog = compile("plain", &[]);
    for ranks in [2, 3] {
        run(&prog, ranks, &[]);
    }
    let _ = std::fs::remove_file(prog);
}

#[test]
fn c_job_under_address_sanitizer() {
    let prog = compile("asan", &["-fsanitize=address", "-fno-omit-frame-pointer"]);
    // Rust's runtime keeps some allocations for the process's lifetime; leaks are not what
    // this run looks for.
    run(&prog, 2, &[("ASAN_OPTIONS", "detect_leaks=0")]);
    let _ = std::fs::remove_file(prog);
}
