//! Extended API conformance (put/get in every form, memset, barriers, errors, threads)
//! through real `rgasnetrun` jobs over every path: one shared-memory supernode, PSHM off (the
//! native Portals engine over UDP loopback) and, with 4 ranks, two supernodes of two (mixed).
//! Each job is bounded by a timeout; the program checks every byte and error variant itself.

use std::path::Path;
use std::time::Duration;

use rgasnet_tests::run_job;

const PROG: &str = env!("CARGO_BIN_EXE_ext_conformance");

/// Runs `mode` on `ranks` ranks over every path and checks that every rank reported success.
fn check(ranks: u32, mode: &str, ok_line: &str) {
    rgasnet_tests::check_every_path(
        Path::new(PROG),
        ranks,
        mode,
        ok_line,
        Duration::from_secs(240),
    );
}

#[test]
fn a_rank_that_drops_its_extended_api_right_after_sending_delivers_everything() {
    // The extended API's handlers hold the client, so the client's state is never dropped on
    // its own; dropping the last `Extended` must deliver what is still queued.
    check(2, "leave", ": leave ok");
}

#[test]
fn rma_two_ranks() {
    check(2, "rma", ": rma ok");
}

#[test]
fn rma_four_ranks() {
    check(4, "rma", ": rma ok");
}

#[test]
fn overwrite_source_after_return_two_ranks() {
    check(2, "overwrite", ": overwrite ok");
}

#[test]
fn overwrite_source_after_return_four_ranks() {
    check(4, "overwrite", ": overwrite ok");
}

#[test]
fn access_regions_two_ranks() {
    check(2, "regions", ": regions ok");
}

#[test]
fn access_regions_four_ranks() {
    check(4, "regions", ": regions ok");
}

#[test]
fn memset_forms_two_ranks() {
    check(2, "memset", ": memset ok");
}

#[test]
fn memset_forms_four_ranks() {
    check(4, "memset", ": memset ok");
}

#[test]
fn barriers_two_ranks() {
    check(2, "barrier", ": barrier ok");
}

/// Runs two-rank `mode`, in which a rank ends its program, over every path: the job must
/// succeed and its output satisfy `ok`.
fn after_a_rank_left(mode: &str, ok: impl Fn(&str) -> bool) {
    for (path, env) in rgasnet_tests::paths(2) {
        let out = run_job(2, Path::new(PROG), &[mode], env, Duration::from_secs(60));
        out.assert_success();
        assert!(
            ok(&out.stdout),
            "{mode} over {path}: {}\n{}",
            out.stdout,
            out.stderr
        );
    }
}

#[test]
fn a_memset_whose_initiator_ended_its_program_is_done_and_the_job_ends_normally() {
    // Rank 0 issues a memset to rank 1 and returns from `main` without waiting; rank 1 polls
    // only once rank 0 has said its program ended, so its handler's answer has nobody to go
    // to. The memset must be done, and the job must not stop on the unanswerable reply (it
    // did: a fatal error, or a retransmission to the gone rank until the peer timeout).
    after_a_rank_left("memset-left", |out| {
        out.contains("rank 1: memset-left ok: the memset of rank 0, which left, is done")
    });
}

#[test]
fn rma_to_a_rank_that_ended_its_program_fails_naming_it() {
    // Rank 1 calls `std::process::exit(0)` after a barrier; the others' puts and gets to it
    // (each get checked against the put before it), then its one-word forms, must soon fail
    // with PeerLeft naming rank 1, instead of being retransmitted to a process that is gone
    // until the peer timeout, or, between node peers, going into its segment unchecked. Four
    // ranks, so that the mixed path has rank 0 on shared memory and ranks 2 and 3 on the
    // network in one job.
    for (path, env) in rgasnet_tests::paths(4) {
        let out = run_job(
            4,
            Path::new(PROG),
            &["rma-left"],
            env,
            Duration::from_secs(60),
        );
        out.assert_success();
        for rank in [0, 2, 3] {
            assert!(
                out.stdout.lines().any(|l| l
                    .starts_with(&format!("rank {rank}: rma-left ok after"))
                    && l.ends_with(
                        "rank 1 ended its program; its segment can no longer be accessed"
                    )),
                "rma-left over {path}: rank {rank} did not report it:\n{}\n{}",
                out.stdout,
                out.stderr
            );
        }
    }
}

#[test]
fn a_barrier_whose_peer_ended_its_program_fails_naming_it() {
    // Rank 1 calls `std::process::exit(0)` instead of the second barrier; its end tells rank
    // 0 (over the network, or in its shared-memory header and by closing its queues), whose
    // barrier must fail at once with BarrierPeerLeft naming rank 1 instead of waiting forever:
    // in `barrier_wait`, or already in `barrier_notify` if rank 1 was known to have left
    // when rank 0 sent it its part.
    after_a_rank_left("barrier-left", |out| {
        out.contains("rank 0: barrier-left ok after")
            && ["barrier_wait", "barrier_notify"].iter().any(|call| {
                out.contains(&format!(
                    "{call}: rank 1 ended its program without completing barrier 2; every rank must call and wait for the same barriers"
                ))
            })
    });
}

#[test]
fn a_barrier_that_waits_long_says_for_whom() {
    // The last rank arrives 2.5 s late; with RGASNET_STALL_WARNING=1 the others say after 1 s
    // that they wait, naming the barrier round and the rank they wait for; then all complete.
    for (path, env) in rgasnet_tests::paths(2) {
        let mut env = env.to_vec();
        env.push(("RGASNET_STALL_WARNING", "1"));
        let out = run_job(
            2,
            Path::new(PROG),
            &["barrier-stall"],
            &env,
            Duration::from_secs(120),
        );
        out.assert_success();
        assert_eq!(
            out.stdout.matches("barrier-stall ok").count(),
            2,
            "{path}: {}",
            out.stdout
        );
        let warning = out
            .stderr
            .lines()
            .find(|l| l.contains("rgasnet: warning: rank 0: barrier_wait has waited"))
            .unwrap_or_else(|| panic!("{path}: no warning from rank 0:\n{}", out.stderr));
        // Over messages the round is named; over shared memory every rank arrives at one
        // counter, and the ranks not there yet are named.
        assert!(
            warning.contains("round 1 of 1: no word yet from rank 1")
                || (path == "pshm"
                    && warning.contains("the shared-memory barrier: no word yet from rank 1)")),
            "{path}: {warning}"
        );
        assert!(
            !out.stderr.contains("rgasnet: warning: rank 1:"),
            "{path}: rank 1 did not wait:\n{}",
            out.stderr
        );
    }
}

#[test]
fn barriers_over_either_shared_memory_node_barrier() {
    // `auto` picks the counter on a host with more ranks than CPUs (CI's machines have two):
    // both kinds, forced, on one memory node of 3 and 4 processes.
    for kind in ["dissemination", "counter"] {
        for ranks in [3u32, 4] {
            let out = run_job(
                ranks,
                Path::new(PROG),
                &["barrier"],
                &[("RGASNET_PSHM_BARRIER", kind)],
                Duration::from_secs(240),
            );
            out.assert_success();
            assert_eq!(
                out.stdout.matches(": barrier ok").count(),
                ranks as usize,
                "{kind} barrier on {ranks} ranks:\n{}\n{}",
                out.stdout,
                out.stderr
            );
        }
    }
}

#[test]
fn a_rank_that_notifies_and_ends_its_program_does_not_hang_either_node_barrier() {
    // Rank 1 of 4 notifies a barrier and exits without waiting: the others' barrier must
    // complete or fail naming rank 1 (dissemination: rank 1 had forwarding still to do), within
    // the job's bound.
    for kind in ["dissemination", "counter"] {
        let out = run_job(
            4,
            Path::new(PROG),
            &["barrier-notify-left"],
            &[("RGASNET_PSHM_BARRIER", kind)],
            Duration::from_secs(120),
        );
        out.assert_success();
        assert_eq!(
            out.stdout.matches("barrier-notify-left ok").count(),
            3,
            "{kind}:\n{}\n{}",
            out.stdout,
            out.stderr
        );
        // The first rank to end its barrier can only have seen rank 1 gone (or completed);
        // a later one may name a rank that ended after failing.
        assert!(
            out.stdout.contains("rank 1 ended its program") || out.stdout.contains("ok: completed"),
            "{kind}: no rank named rank 1 or completed:\n{}\n{}",
            out.stdout,
            out.stderr
        );
    }
}

#[test]
fn a_bad_node_barrier_kind_is_a_start_up_error_naming_the_variable() {
    let out = run_job(
        2,
        Path::new(PROG),
        &["barrier"],
        &[("RGASNET_PSHM_BARRIER", "tree")],
        Duration::from_secs(60),
    );
    assert!(!out.status.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("RGASNET_PSHM_BARRIER")
            && out.stderr.contains("`auto`, `counter` or `dissemination`"),
        "{}",
        out.stderr
    );
}

#[test]
fn barriers_three_ranks() {
    check(3, "barrier", ": barrier ok");
}

#[test]
fn barriers_four_ranks() {
    check(4, "barrier", ": barrier ok");
}

#[test]
fn errors_are_typed_two_ranks() {
    check(2, "errors", ": errors ok");
}

#[test]
fn errors_are_typed_four_ranks() {
    check(4, "errors", ": errors ok");
}

#[test]
fn four_threads_per_rank_two_ranks() {
    check(2, "threads", ": threads ok");
}

#[test]
fn four_threads_per_rank_four_ranks() {
    check(4, "threads", ": threads ok");
}

#[test]
fn blocking_calls_from_more_threads_than_slots_two_ranks() {
    check(2, "blocking-threads", ": blocking-threads ok");
}

#[test]
fn blocking_calls_from_more_threads_than_slots_four_ranks() {
    check(4, "blocking-threads", ": blocking-threads ok");
}

#[test]
fn operations_on_self() {
    check(2, "self", ": self ok");
}

#[test]
fn a_failing_rank_fails_the_job() {
    let out = run_job(
        2,
        Path::new(PROG),
        &["no-such-mode"],
        &[],
        Duration::from_secs(60),
    );
    assert!(!out.status.success(), "{}", out.stdout);
    assert!(
        out.stderr.contains("unknown mode no-such-mode"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_short_event_queue_makes_callers_wait_not_fail() {
    // 16 entries: eight explicit puts of up to 4 MiB (16 network puts each) overrun it, so
    // issuing must make progress until completions free room.
    let env = [("GASNET_EXTENDED_EVENT_QUEUE_LENGTH", "16")];
    for mode in ["rma", "threads"] {
        let out = run_job(2, Path::new(PROG), &[mode], &env, Duration::from_secs(240));
        out.assert_success();
        assert_eq!(out.stdout.matches(" ok").count(), 2, "{}", out.stdout);
    }
}

#[test]
fn an_unusable_event_queue_length_is_reported_by_name() {
    let env = [("GASNET_EXTENDED_EVENT_QUEUE_LENGTH", "4")];
    let out = run_job(2, Path::new(PROG), &["self"], &env, Duration::from_secs(60));
    assert!(!out.status.success(), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("GASNET_EXTENDED_EVENT_QUEUE_LENGTH=\"4\" is invalid"),
        "{}",
        out.stderr
    );
}

#[test]
fn rma_in_mtu_sized_datagrams_four_ranks() {
    // A link MTU of 1500 (as on Ethernet) makes the engine cut 1472-byte datagrams and send
    // them in trains; every size of put and get must still land byte for byte.
    let out = run_job(
        4,
        Path::new(PROG),
        &["rma"],
        &[("RGASNET_PSHM", "0"), ("RGASNET_MTU", "1500")],
        Duration::from_secs(240),
    );
    out.assert_success();
    assert_eq!(
        out.stdout.matches(": rma ok").count(),
        4,
        "{}\n{}",
        out.stdout,
        out.stderr
    );
}
