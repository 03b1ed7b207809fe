//! Core AM conformance through real `rgasnetrun` jobs (native Portals engine over UDP
//! loopback). Each job is bounded by a timeout.

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

#[test]
fn basic_two_ranks() {
    let out = job(2, "basic", &[]);
    out.assert_success();
    assert_eq!(out.stdout.matches("basic ok").count(), 2, "{}", out.stdout);
}

#[test]
fn basic_four_ranks() {
    let out = job(4, "basic", &[]);
    out.assert_success();
    assert_eq!(out.stdout.matches("basic ok").count(), 4, "{}", out.stdout);
}

#[test]
fn flood_forces_flow_control_recovery() {
    let out = job(
        4,
        "flood",
        &[
            ("GASNET_AM_NUM_ENTRIES", "2"),
            ("GASNET_AM_BUFFER_SIZE", "131072"),
        ],
    );
    out.assert_success();
    assert!(out.stdout.contains("flood ok"), "{}", out.stdout);
}

#[test]
fn request_reply_flood_two_ranks() {
    let out = job(2, "reqrep-flood", &[]);
    out.assert_success();
    assert_eq!(out.stdout.matches("request/reply flood ok").count(), 2);
}

#[test]
fn four_threads_per_rank() {
    let out = job(2, "threads", &[]);
    out.assert_success();
    assert_eq!(out.stdout.matches("threads ok").count(), 2);
}

#[test]
fn errors_are_typed_at_the_initiator_and_in_handlers() {
    let out = job(2, "errors", &[]);
    out.assert_success();
    assert_eq!(out.stdout.matches("errors ok").count(), 2);
}

#[test]
fn unregistered_handler_at_target_is_fatal_and_named() {
    let out = job(2, "unregistered", &[]);
    assert!(!out.status.success(), "job should fail: {}", out.stdout);
    assert!(
        out.stderr.contains("handler 200") && out.stderr.contains("rank 0"),
        "diagnostic must name the handler and the source: {}",
        out.stderr
    );
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
    assert!(
        out.stderr.contains("GASNET_AM_NUM_ENTRIES=\"many\" is invalid"),
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
