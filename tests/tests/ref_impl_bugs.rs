//! Reproducers of Portals 4 reference-implementation bugs, against the library alone
//! (feature `ref-impl`; the programs `src/bin/ref_connect.rs`, `src/bin/ref_flood.rs` and
//! `src/bin/ref_blocks.rs` use `rgasnet_portals::refimpl::ni::LibNi`, the thin layer over the
//! library's calls, and no conduit). Each is why the `ref` engine adapts (a limit, a start-up step) or leaves a
//! conformance mode out over Sandia's reference implementation (README, "Over a Portals
//! library"). `scripts/test.sh` runs them over two libraries and names which in
//! `RGASNET_TEST_PORTALS_LIBRARY`: over Sandia's reference implementation (`reference`, the
//! default) each bug must show, exactly as described; over rgasnet's own libportals
//! (`rgasnet`) the same programs must pass, which shows that the programs are right. A
//! reproducer that starts passing over the reference implementation means a fixed bug: lift
//! the limit it stands for.
#![cfg(feature = "ref-impl")]

use std::path::Path;
use std::time::Duration;

use rgasnet_tests::library::{testing_reference_implementation, DROPPED};
use rgasnet_tests::{run_job, JobOutput};

const CONNECT: &str = env!("CARGO_BIN_EXE_ref_connect");
const FLOOD: &str = env!("CARGO_BIN_EXE_ref_flood");
const BLOCKS: &str = env!("CARGO_BIN_EXE_ref_blocks");

fn run(program: &str, args: &[&str]) -> JobOutput {
    run_job(
        2,
        Path::new(program),
        args,
        &[("PTL_IFACE_NAME", "lo")],
        Duration::from_secs(120),
    )
}

/// Runs of a reproducer before its bug counts as gone: the library's losses do not come in
/// every run.
const TRIES: usize = 3;

/// Runs `program args` until `done` says a run is the one wanted, at most [`TRIES`] times
/// over the reference implementation (each other run printed with its stderr, so that a log
/// shows how often it happens), once over rgasnet's libportals; the last run.
fn run_until(program: &str, args: &[&str], done: impl Fn(&JobOutput) -> bool) -> JobOutput {
    let mut out = run(program, args);
    if testing_reference_implementation() {
        for attempt in 1..TRIES {
            if done(&out) {
                break;
            }
            eprintln!(
                "{program} {args:?}: run {attempt} of at most {TRIES} over the reference \
                 implementation was not the one wanted ({:?}), so it runs again; its stderr:\n{}",
                out.status, out.stderr
            );
            out = run(program, args);
        }
    }
    out
}

/// Runs `program args` below a bug's threshold, where it must work; over the reference
/// implementation in one of [`TRIES`] runs ([`run_until`]), since its other bugs (the kernel
/// drops of the first reproducer, races in its progress thread) can spoil any run: once in a
/// CI run here, rank 1's 200 gets of 800 bytes never reached rank 0.
fn works(program: &str, args: &[&str]) {
    run_until(program, args, JobOutput::succeeded).assert_success();
}

/// Runs `program args` until the reference implementation shows `symptom` ([`run_until`]),
/// and checks the last run with [`shows`]; over rgasnet's libportals once (it must pass).
fn shows_in_some_run(program: &str, args: &[&str], symptom: &str, ok: &str) {
    let out = run_until(program, args, |o| o.stderr.contains(symptom));
    shows(&out, symptom, ok);
}

/// Over the reference implementation: the job fails and some rank said `symptom`. Over
/// rgasnet's libportals: both ranks printed `ok`.
fn shows(out: &JobOutput, symptom: &str, ok: &str) {
    if testing_reference_implementation() {
        assert!(
            !out.status.success() && out.stderr.contains(symptom),
            "the reference implementation no longer shows `{symptom}` (fixed? lift the limit):\n{}\n{}",
            out.stdout,
            out.stderr
        );
    } else {
        out.assert_success();
        assert_eq!(
            out.stdout.matches(ok).count(),
            2,
            "{}\n{}",
            out.stdout,
            out.stderr
        );
    }
}

#[test]
#[ignore = "a race in the library: it shows in most runs, but a run where the threads get \
            through can then hang in the library's exit; run with --ignored"]
fn reference_bug_threads_connecting_to_one_peer_at_once_wait_forever_in_ptlput() {
    // One thread's first put connects and is acknowledged; of four at once, some never
    // return (a race: in most runs).
    works(CONNECT, &["1", "10"]);
    let symptom = "threads are still inside PtlPut";
    shows_in_some_run(CONNECT, &["4", "10"], symptom, "ref connect ok");
}

#[test]
fn reference_bug_a_datagram_the_kernel_drops_is_never_sent_again() {
    // The library's UDP transport sends a datagram once. 3,000 7,000-byte acknowledged puts
    // each way, at most 4 unacknowledged: all come. At most 12: the receiving socket's buffer
    // (`net.core.rmem_default`, 208 KiB here) overflows, the kernel drops datagrams
    // (`RcvbufErrors`), and the puts or acknowledgements they carried never come. With the
    // buffer raised (`sysctl net.core.rmem_default=8388608`) all come, here and in the two
    // tests below (measured by hand: the test does not change the host's settings). Why the
    // conduit bounds the bytes of AM puts in flight (RGASNET_PORTALS_MAX_INFLIGHT_BYTES). The
    // puts within the bound come from four threads at once, as a program's AM sends do: the
    // library takes concurrent calls (losses come from the bytes in flight, not the threads).
    works(FLOOD, &["1", "3000", "4", "10", "7000", "next", "4"]);
    let args = ["1", "3000", "12", "10", "7000"];
    shows_in_some_run(FLOOD, &args, DROPPED, "ref flood ok");
}

#[test]
fn reference_bug_puts_or_their_acknowledgements_are_lost_with_more_than_32_in_flight() {
    // 5,000 acknowledged 32-byte puts each way: at most 16 waiting for their ACK, all come
    // (32 too, in most runs); at most 64, some ACKs (and sometimes some puts) never come:
    // the kernel dropped their datagrams (the bug above).
    works(FLOOD, &["1", "5000", "16", "10"]);
    let args = ["1", "5000", "64", "10"];
    shows_in_some_run(FLOOD, &args, DROPPED, "ref flood ok");
}

#[test]
fn reference_bug_puts_of_1000_bytes_deliver_other_bytes() {
    // 800-byte puts arrive intact; 1,000-byte puts deposit bytes that are not the source's
    // (the same happens from about 900 to 1,700 bytes).
    works(FLOOD, &["1", "100", "4", "10", "800"]);
    let args = ["1", "100", "4", "10", "1000"];
    shows_in_some_run(FLOOD, &args, "ref_flood: message ", "ref flood ok");
}

#[test]
fn reference_bug_puts_of_more_than_63859_bytes_deliver_other_bytes() {
    // One at a time (nothing dropped): 50 puts of 63,859 bytes arrive intact; of 63,860
    // bytes (and every larger size tried, to 65,000) byte 63,859 on is not the source's.
    // Why the AM mode `basic`, whose Mediums go up to 65,000 bytes, is left out.
    works(FLOOD, &["1", "50", "1", "10", "63859"]);
    let args = ["1", "50", "1", "10", "63860"];
    shows_in_some_run(FLOOD, &args, "byte 63859 of 63860 is", "ref flood ok");
}

#[test]
fn reference_bug_gets_of_1000_bytes_crash_the_library() {
    // 200 gets of 800 bytes (or 1,800) come back; gets of 1,000 bytes (1,000 to 1,500 here,
    // the range where puts deposit other bytes) kill a process: SIGSEGV in a memcpy of the
    // library's progress thread (process_init, from its UDP receive path). Why the extended
    // API's `threads` mode, whose gets take random lengths, is left out.
    works(FLOOD, &["1", "200", "2", "10", "800", "next", "1", "get"]);
    let args = ["1", "200", "2", "10", "1000", "next", "1", "get"];
    shows_in_some_run(FLOOD, &args, "(SIGSEGV)", "ref flood ok");
}

#[test]
fn reference_bug_puts_of_60000_bytes_are_lost() {
    // 1,000 16 KiB puts all arrive; of 1,000 60,000-byte puts some never arrive or are
    // never acknowledged (48,000 bytes and more in most runs here, 40,000 in some): the
    // kernel dropped datagrams of theirs (the bug above).
    works(FLOOD, &["1", "1000", "4", "10", "16384"]);
    let args = ["1", "1000", "4", "10", "60000"];
    shows_in_some_run(FLOOD, &args, DROPPED, "ref flood ok");
}

#[test]
fn reference_bug_a_put_among_refused_16_kib_puts_is_lost() {
    // The AM layer's receive pattern without the conduit: two locally managed blocks that
    // fill, unlink and are appended again on a flow-controlled portal, refused puts sent
    // again. 20,000 128-byte puts into 1 KiB blocks (thousands refused) all arrive and are
    // acknowledged; of 20,000 16,388-byte puts (a lent Medium's size) into 128 KiB blocks one
    // is acknowledged but never delivered, or never acknowledged (every run here): eight of
    // them in flight overflow the receiving socket's buffer, and the kernel drops datagrams
    // (the first bug above; the refusals do not matter).
    works(BLOCKS, &["20000", "8", "128", "1024", "10"]);
    let args = ["20000", "8", "16388", "131072", "10"];
    shows_in_some_run(BLOCKS, &args, DROPPED, "ref blocks ok");
}
