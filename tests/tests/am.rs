//! Core AM conformance through real `rgasnetrun` jobs. Every conformance mode runs over each
//! path: all ranks in one shared-memory supernode, PSHM off (the native Portals engine over UDP
//! loopback), and — with 4 ranks — two supernodes of two that talk over Portals (mixed). Each
//! job is bounded by a timeout.

use std::path::Path;
use std::time::Duration;

use rgasnet_tests::run_job;

const PROG: &str = env!("CARGO_BIN_EXE_am_conformance");

fn job(ranks: u32, mode: &str, env: &[(&str, &str)]) -> rgasnet_tests::JobOutput {
    run_job(
        ranks,
        Path::new(PROG),
        &[mode],
        env,
        Duration::from_secs(180),
    )
}

/// Runs `mode` over every path that `ranks` ranks can form, asserting success and that each
/// rank printed `ok_line`.
fn every_path(ranks: u32, mode: &str, ok_line: &str) {
    rgasnet_tests::check_every_path(
        Path::new(PROG),
        ranks,
        mode,
        ok_line,
        Duration::from_secs(180),
    );
}

#[test]
fn basic_two_ranks() {
    every_path(2, "basic", "basic ok");
}

#[test]
fn basic_four_ranks() {
    every_path(4, "basic", "basic ok");
}

#[test]
fn flood_forces_flow_control_recovery() {
    // Flow control is the network path's: run with PSHM off, and mixed (rank 1 shares memory
    // with rank 0, ranks 2 and 3 reach it over Portals).
    for extra in [("RGASNET_PSHM", "0"), ("GASNET_SUPERNODE_MAXSIZE", "2")] {
        let out = job(4, "flood", &rgasnet_tests::small_receive_blocks(&[extra]));
        out.assert_success();
        assert!(out.stdout.contains("flood ok"), "{extra:?}: {}", out.stdout);
    }
}

#[test]
fn a_flood_that_fills_the_event_queue_disables_both_am_portals_without_loss() {
    // A short AM event queue with the default receive blocks: rank 0 (busy for half a second)
    // runs out of event slots before receive space, so flow control disables the AM portal
    // and then the Long-data portal, which share that queue. Each needs a slot for its
    // PT_DISABLED; with one kept for the queue, the second was lost and rank 0 died with
    // "AM event queue overflow" (as did a one-rank flood of 128 KiB Longs to itself).
    for len in ["64", "512"] {
        let env = [("RGASNET_PSHM", "0"), ("GASNET_AM_EVENT_QUEUE_LENGTH", len)];
        let out = job(4, "flood", &env);
        out.assert_success();
        assert!(
            out.stdout.contains("flood ok"),
            "queue of {len}: {}",
            out.stdout
        );
    }
}

#[test]
fn drained_receive_blocks_are_rewound() {
    // The network path's receive blocks (shared memory has none).
    let out = job(2, "rewind", &[("RGASNET_PSHM", "0")]);
    out.assert_success();
    assert_eq!(out.stdout.matches("rewind ok").count(), 2, "{}", out.stdout);
}

#[test]
fn a_rank_that_returns_right_after_sending_still_delivers_everything() {
    // Rank 0 sends 6,000 requests and returns from main at once; on the network most are
    // still queued behind the transport's window or unacknowledged then, and the client's
    // end delivers them. `quiesce` with no time left reports them as unacknowledged.
    for (path, env) in rgasnet_tests::paths(2) {
        let out = job(2, "leave", env);
        out.assert_success();
        assert!(
            out.stdout.contains("rank 1: leave ok: 6000 requests"),
            "{path}: {}\n{}",
            out.stdout,
            out.stderr
        );
    }
}

#[test]
fn a_handler_that_panics_leaves_the_conduit_working() {
    // Rank 1's handler panics on one large Medium in twenty and rank 1 catches the panics
    // around `poll`. On the network each payload is lent in place from one of two small
    // receive blocks, which must still be given back and posted again; on shared memory the
    // queue lock the panic poisoned must not stop the queue. Every other message arrives,
    // exactly once.
    for (path, env) in rgasnet_tests::paths(2) {
        let out = job(2, "unwind", &rgasnet_tests::small_receive_blocks(env));
        out.assert_success();
        assert!(
            out.stdout
                .contains("rank 1: unwind ok: 380 messages, 20 handler panics caught"),
            "{path}: {}\n{}",
            out.stdout,
            out.stderr
        );
    }
}

#[test]
fn a_send_to_a_rank_that_ended_its_program_fails_naming_it() {
    // Rank 1 computes without polling while rank 0 floods it, then drops its client. Rank 0's
    // later requests must fail with PeerLeft naming rank 1 (on shared memory rank 1 closed its
    // queues; over the network it said its program ended), instead of waiting for room
    // forever or being accepted and never handled. Everything accepted before must have been
    // handled by rank 1's end: the two counts are equal.
    for (path, env) in rgasnet_tests::paths(2) {
        let out = job(2, "send-left", env);
        out.assert_success();
        rgasnet_tests::assert_send_left_counts(path, &out);
    }
}

#[test]
fn an_end_that_cannot_hand_over_its_replies_says_so_and_still_leaves() {
    // Shared memory: rank 0's end runs the handlers of 300 requests, whose 60 KB replies wait
    // for room in rank 1's reply queue while rank 1 does not poll for 3 s. With a 1 s bound
    // the end must warn (AmError::Undrained) and still mark rank 0 as left, so that rank 1
    // sees it gone instead of waiting for it.
    let out = job(2, "undrained", &[("RGASNET_PEER_TIMEOUT", "1")]);
    assert!(
        out.status.success()
            && out.stdout.contains("rank 1: undrained ok: rank 0 has left")
            && out
                .stderr
                .contains("rank 0 leaves the job with messages undelivered: quiesce: within")
            && out.stderr.contains(
                "replies did not get into node peers' queues (a node peer stopped polling)"
            ),
        "{:?}\n{}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
}

#[test]
fn a_send_that_waits_long_for_room_says_so_and_completes() {
    // Rank 1 does not poll for 2.5 s while rank 0 floods it: rank 0's sends run out of room
    // (network flow control, or a full shared-memory queue) and wait; after 1 s rank 0 says so
    // on stderr, naming the target; then everything arrives exactly once.
    for (path, env) in rgasnet_tests::paths(2) {
        let mut env = rgasnet_tests::small_receive_blocks(env);
        env.push(("RGASNET_STALL_WARNING", "1"));
        let out = job(2, "stall", &env);
        out.assert_success();
        assert_eq!(
            out.stdout.matches("stall ok").count(),
            2,
            "{path}: {}\n{}",
            out.stdout,
            out.stderr
        );
        let warnings: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("rgasnet: warning: rank 0:"))
            .collect();
        assert!(!warnings.is_empty(), "{path}: no warning:\n{}", out.stderr);
        assert!(
            warnings[0].contains("to rank 1 has waited")
                && warnings[0].contains("Rank 1 must poll"),
            "{path}: {}",
            warnings[0]
        );
    }
}

#[test]
fn request_reply_flood_two_ranks() {
    every_path(2, "reqrep-flood", "request/reply flood ok");
}

#[test]
fn large_replies_from_handlers_never_wait_for_each_other() {
    every_path(2, "reply-storm", "reply storm ok");
}

#[test]
fn four_threads_per_rank() {
    every_path(2, "threads", "threads ok");
    every_path(4, "threads", "threads ok");
}

#[test]
fn errors_are_typed_at_the_initiator_and_in_handlers() {
    every_path(2, "errors", "errors ok");
}

#[test]
fn unregistered_handler_at_target_is_fatal_and_named() {
    for (path, env) in rgasnet_tests::paths(2) {
        let out = job(2, "unregistered", env);
        assert!(
            !out.status.success(),
            "{path}: job should fail: {}",
            out.stdout
        );
        assert!(
            out.stderr.contains("handler 200") && out.stderr.contains("rank 0"),
            "{path}: diagnostic must name the handler and the source: {}",
            out.stderr
        );
    }
}

#[test]
fn exit_from_one_rank_ends_the_job_with_its_code() {
    let out = job(3, "exit", &[]);
    assert_eq!(out.status.code(), Some(7), "{}", out.stderr);
}

#[test]
fn bad_configuration_is_a_startup_error_naming_the_variable() {
    let out = job(2, "basic", &[("GASNET_AM_NUM_ENTRIES", "many")]);
    assert!(!out.status.success());
    let said = "GASNET_AM_NUM_ENTRIES=\"many\" is invalid";
    assert!(out.stderr.contains(said), "{}", out.stderr);
    // Once per line: each layer of the error says its cause, and the line does not repeat it.
    assert!(
        out.stderr.lines().all(|l| l.matches(said).count() <= 1),
        "{}",
        out.stderr
    );
}

#[test]
fn asking_for_the_ref_engine_in_a_build_without_it_is_a_startup_error_that_says_how_to_build_it() {
    let out = job(2, "basic", &[("RGASNET_PORTALS", "ref")]);
    assert!(!out.status.success());
    assert!(
        out.stderr
            .contains("RGASNET_PORTALS=ref: this build of rgasnet has no Portals library path")
            && out.stderr.contains("--features rgasnet/ref-impl")
            && out.stderr.contains("PORTALS4_DIR"),
        "{}",
        out.stderr
    );
}

#[test]
fn started_without_a_launcher_says_how_to_launch() {
    let out = std::process::Command::new(PROG)
        .arg("basic")
        .env_remove("RGASNET_RANK")
        .output()
        .expect("run the program directly");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rgasnetrun"), "{err}");
}
