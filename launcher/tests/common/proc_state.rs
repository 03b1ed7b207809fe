//! Whether a process still runs, read from `/proc`. Shared by the launcher's tests (through
//! `common`) and the benchmark crate's job tests (`#[path]`), which cannot depend on each
//! other's test code.
// `pub` for `common`'s re-export; the benchmark crate's tests include this file privately.
#![allow(unreachable_pub)]

/// Whether a process with this pid still runs: not gone, and not a zombie waiting for its
/// parent to reap it.
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.split_whitespace()
            .nth(2)
            .is_some_and(|state| state != "Z")
    })
}
