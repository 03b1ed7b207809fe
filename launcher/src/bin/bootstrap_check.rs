//! `rgasnet-bootstrap-check`: test program for the launcher's multi-process tests: a rank that exercises the bootstrap and
//! checks every result value by value, or misbehaves on purpose.
//!
//! `bootstrap_check MODE`, MODE one of:
//! - `check`: KV put/fence/get, missing key, allgather, broadcast from every root, barrier;
//!   prints `rank R/S ok host_ranks=... key=...` and exits 0, or prints what differed and exits 1.
//! - `exit-in-barrier R CODE`: rank R exits with CODE while the others wait in a barrier.
//! - `abort R CODE`: rank R calls `abort(CODE)` while the others wait in a barrier.
//! - `signal R`: rank R kills itself with SIGKILL while the others wait in a barrier.
//! - `sleep`: every rank connects and sleeps (for Ctrl-C / SIGTERM tests); prints its pid.
//! - `size-mismatch`: rank 0 gives an allgather blob of another size; prints the error.
//! - `env`: prints the RGASNET_* environment and `EXPORTED=$RGASNET_TEST_EXPORT`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use rgasnet_launcher::{Bootstrap, BootstrapError};

fn check(b: &Bootstrap) -> Result<(), String> {
    let (r, s) = (b.rank(), b.size());
    let err = |what: &str, e: BootstrapError| format!("{what}: {e}");
    b.put(&format!("addr/{r}"), format!("value-of-{r}").as_bytes())
        .map_err(|e| err("put", e))?;
    b.fence().map_err(|e| err("fence", e))?;
    for peer in 0..s {
        let got = b.get(&format!("addr/{peer}")).map_err(|e| err("get", e))?;
        if got != format!("value-of-{peer}").as_bytes() {
            return Err(format!("get addr/{peer} returned {got:?}"));
        }
    }
    match b.get("nobody-put-this") {
        Err(BootstrapError::KeyNotFound { key }) if key == "nobody-put-this" => {}
        other => return Err(format!("get of a missing key returned {other:?}")),
    }
    let mine: Vec<u8> = (0..16)
        .map(|i| (r as u8).wrapping_mul(31).wrapping_add(i))
        .collect();
    let all = b.allgather(&mine).map_err(|e| err("allgather", e))?;
    for (peer, blob) in all.iter().enumerate() {
        let want: Vec<u8> = (0..16)
            .map(|i| (peer as u8).wrapping_mul(31).wrapping_add(i))
            .collect();
        if *blob != want {
            return Err(format!(
                "allgather blob of rank {peer} is {blob:?}, want {want:?}"
            ));
        }
    }
    for root in 0..s {
        let payload = format!("from-root-{root}-{}", "x".repeat(root as usize * 700));
        let data = (root == r).then_some(payload.as_bytes());
        let got = b.broadcast(root, data).map_err(|e| err("broadcast", e))?;
        if got != payload.as_bytes() {
            return Err(format!("broadcast from {root} gave {} bytes", got.len()));
        }
    }
    let keys = b
        .allgather(&b.job_key().to_le_bytes())
        .map_err(|e| err("allgather key", e))?;
    if keys.iter().any(|k| *k != b.job_key().to_le_bytes()) {
        return Err("ranks disagree on the job key".into());
    }
    if !b.host_ranks().contains(&r) {
        return Err(format!("host_ranks {:?} lacks this rank", b.host_ranks()));
    }
    b.barrier().map_err(|e| err("barrier", e))?;
    Ok(())
}

fn arg(n: usize) -> Option<i64> {
    std::env::args().nth(n).and_then(|a| a.parse().ok())
}

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode == "env" {
        for (k, v) in std::env::vars() {
            if k.starts_with("RGASNET_") {
                println!("{k}={v}");
            }
        }
        println!(
            "EXPORTED={}",
            std::env::var("RGASNET_TEST_EXPORT_PLAIN").unwrap_or_default()
        );
        return ExitCode::SUCCESS;
    }
    let b = match Bootstrap::from_env() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("bootstrap_check: {e}");
            return ExitCode::from(3);
        }
    };
    let target = arg(2).unwrap_or(0) as u32;
    let code = arg(3).unwrap_or(0) as i32;
    match mode.as_str() {
        "check" => match check(&b) {
            Ok(()) => {
                println!(
                    "rank {}/{} ok host_ranks={:?} key={:016x}",
                    b.rank(),
                    b.size(),
                    b.host_ranks(),
                    b.job_key()
                );
                drop(b);
                ExitCode::SUCCESS
            }
            Err(e) => {
                println!("rank {} FAILED: {e}", b.rank());
                ExitCode::from(1)
            }
        },
        "exit-in-barrier" | "abort" | "signal" => {
            if b.rank() == target {
                match mode.as_str() {
                    "exit-in-barrier" => {
                        // Lets the tests measure the time from this exit to the launcher's.
                        let ms = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_millis());
                        println!("EXITING_AT_MS={ms}");
                        std::process::exit(code)
                    }
                    "abort" => b.abort(code),
                    _ => {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::this(),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                }
            }
            // The others wait here until the launcher stops them; an error means the job
            // broke, which is what the test expects too.
            match b.barrier() {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("rank {}: barrier: {e}", b.rank());
                    ExitCode::from(4)
                }
            }
        }
        "sleep" => {
            println!("rank {} pid {} sleeping", b.rank(), std::process::id());
            let _ = b.barrier();
            std::thread::sleep(std::time::Duration::from_secs(600));
            ExitCode::SUCCESS
        }
        "size-mismatch" => {
            let blob = vec![0u8; if b.rank() == 0 { 4 } else { 8 }];
            match b.allgather(&blob) {
                Err(e @ BootstrapError::Collective { .. }) => {
                    println!("rank {} got: {e}", b.rank());
                    ExitCode::SUCCESS
                }
                other => {
                    println!("rank {} unexpected: {other:?}", b.rank());
                    ExitCode::from(1)
                }
            }
        }
        other => {
            eprintln!("bootstrap_check: unknown mode {other:?}");
            ExitCode::from(2)
        }
    }
}
