//! Real jobs over a network that loses and duplicates datagrams (see `rgasnet_tests::lossy`):
//! 5 % of the UDP datagrams dropped, 2 % sent twice, PSHM off so that every rank talks over
//! the native Portals engine (or, for the mixed test, supernodes of two that talk over it). Each conformance program checks its own data byte by byte and
//! counts every message it expects exactly once; the job must succeed, and no rank may wait
//! for a peer timeout at its end.

use std::path::Path;
use std::time::Duration;

use rgasnet_tests::lossy::{run_lossy_job, Loss};

const AM: &str = env!("CARGO_BIN_EXE_am_conformance");
const EXT: &str = env!("CARGO_BIN_EXE_ext_conformance");

const LOSS: Loss = Loss {
    drop_permille: 50,
    duplicate_permille: 20,
};

/// Runs `program mode` on `ranks` ranks over the lossy network (with `env` on top of PSHM
/// off, unless `env` sets supernodes), asserting that it succeeds and that no rank waited for
/// a peer that had left. `None` if this machine cannot make the lossy network.
fn lossy_job(
    test: &str,
    program: &str,
    ranks: u32,
    mode: &str,
    env: &[(&str, &str)],
) -> Option<rgasnet_tests::JobOutput> {
    // A rank left waiting for a peer that is gone waits out the peer timeout: set far above
    // what a job takes (about a second), so that such a wait shows in the elapsed time.
    let mut all_env = vec![("RGASNET_PEER_TIMEOUT", "60")];
    if !env.iter().any(|(k, _)| *k == "GASNET_SUPERNODE_MAXSIZE") {
        all_env.push(("RGASNET_PSHM", "0"));
    }
    all_env.extend_from_slice(env);
    let out = run_lossy_job(
        test,
        LOSS,
        ranks,
        Path::new(program),
        &[mode],
        &all_env,
        Duration::from_secs(120),
    )?;
    // Exit 0, and no rank's end ran out of time.
    out.assert_success();
    assert!(
        out.elapsed < Duration::from_secs(30),
        "{mode} under loss took {:?}: a rank waited for a peer that had left\n--- stderr\n{}",
        out.elapsed,
        out.stderr
    );
    Some(out)
}

/// [`lossy_job`], also asserting that `ok_line` was printed `ok_count` times.
fn lossy(
    test: &str,
    program: &str,
    ranks: u32,
    mode: &str,
    env: &[(&str, &str)],
    ok_line: &str,
    ok_count: usize,
) {
    let Some(out) = lossy_job(test, program, ranks, mode, env) else {
        return;
    };
    assert_eq!(
        out.stdout.matches(ok_line).count(),
        ok_count,
        "{mode} under loss: `{ok_line}` expected {ok_count} times\n--- stdout\n{}\n--- stderr\n{}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn active_messages_arrive_exactly_once_under_loss_and_duplication() {
    let t = "active_messages_arrive_exactly_once_under_loss_and_duplication";
    // Requests, replies and Medium/Long payloads, checked byte by byte.
    lossy(t, AM, 4, "basic", &[], "basic ok", 4);
    // 20,000 request/reply pairs each way between two ranks.
    lossy(
        t,
        AM,
        2,
        "reqrep-flood",
        &[],
        "request/reply flood ok: 20000",
        2,
    );
    // Flow control engages (tiny receive blocks) while datagrams are lost: every refused
    // message is resent, none is delivered twice.
    lossy(
        t,
        AM,
        4,
        "flood",
        &rgasnet_tests::small_receive_blocks(&[]),
        "exactly once",
        1,
    );
    // Four threads per rank send and poll at once.
    lossy(t, AM, 4, "threads", &[], "threads ok", 4);
}

#[test]
fn a_rank_that_leaves_right_after_sending_delivers_everything_under_loss() {
    let t = "a_rank_that_leaves_right_after_sending_delivers_everything_under_loss";
    // Rank 0 returns from main with thousands of requests unacknowledged; its end resends
    // the lost ones. Rank 1 counts exactly 6,000 and sees no duplicate afterwards.
    lossy(t, AM, 2, "leave", &[], "rank 1: leave ok: 6000 requests", 1);
    lossy(
        t,
        EXT,
        2,
        "leave",
        &[],
        "rank 1: leave ok: 6000 requests",
        1,
    );
}

#[test]
fn a_rank_that_ends_while_refused_messages_to_it_wait_to_be_resent_takes_them_all_under_loss() {
    // Rank 1 does not poll while rank 0 floods it with 8 KiB Mediums: its two small receive
    // blocks fill and it refuses the rest, which rank 0 queues to resend. Then rank 1's
    // program ends. Rank 0's later requests must fail (PeerLeft), and everything accepted
    // before, resent or not, must be handled by rank 1's end: a leaving rank stays until the
    // messages it refused are sent again and acknowledged (it lost some before).
    let t =
        "a_rank_that_ends_while_refused_messages_to_it_wait_to_be_resent_takes_them_all_under_loss";
    let Some(out) = lossy_job(
        t,
        AM,
        2,
        "send-left",
        &rgasnet_tests::small_receive_blocks(&[("AMC_SEND_LEFT_BYTES", "8192")]),
    ) else {
        return;
    };
    rgasnet_tests::assert_send_left_counts("send-left under loss", &out);
    assert!(
        out.stdout.contains("resent after a refusal") && !out.stdout.contains("(0 resent"),
        "no refusal was resent, so the test did not test that\n{}",
        out.stdout
    );
}

#[test]
fn one_sided_operations_and_barriers_complete_under_loss_and_duplication() {
    let t = "one_sided_operations_and_barriers_complete_under_loss_and_duplication";
    // Random puts and gets of every size against a shadow copy; the probe handlers hold the
    // extended API, so each rank's end runs when its main thread ends.
    lossy(t, EXT, 4, "rma", &[], "rma ok", 4);
    lossy(t, EXT, 4, "memset", &[], "memset ok", 4);
    lossy(t, EXT, 4, "barrier", &[], "barrier ok", 4);
}

#[test]
fn supernodes_of_two_over_a_lossy_network_deliver_everything() {
    let t = "supernodes_of_two_over_a_lossy_network_deliver_everything";
    // Ranks 0 and 1 share memory, as do 2 and 3; the pairs talk over the lossy network.
    let mixed = [("GASNET_SUPERNODE_MAXSIZE", "2")];
    lossy(t, AM, 4, "basic", &mixed, "basic ok", 4);
    lossy(
        t,
        AM,
        4,
        "flood",
        &rgasnet_tests::small_receive_blocks(&[("GASNET_SUPERNODE_MAXSIZE", "2")]),
        "exactly once",
        1,
    );
    lossy(t, EXT, 4, "rma", &mixed, "rma ok", 4);
    lossy(t, EXT, 4, "barrier", &mixed, "barrier ok", 4);
}

#[test]
fn bulk_data_in_mtu_sized_trains_completes_under_loss_and_duplication() {
    let t = "bulk_data_in_mtu_sized_trains_completes_under_loss_and_duplication";
    // RGASNET_MTU=1500 on loopback: 1472-byte datagrams, sent in trains of up to 64 (UDP
    // segmentation offload) and taken in coalesced (GRO), so one dropped train loses many
    // datagrams at once; puts, gets and Longs of every size must still arrive exactly once.
    let mtu = [("RGASNET_MTU", "1500")];
    lossy(t, EXT, 4, "rma", &mtu, "rma ok", 4);
    lossy(t, AM, 4, "basic", &mtu, "basic ok", 4);
}
