//! Jobs started by `rgasnetrun` whose ranks talk through a Portals 4 library (feature
//! `ref-impl`; CI: Sandia's reference implementation, `PTL_IFACE_NAME=lo`): the ranks exchange
//! the library's process ids through rgasnet's bootstrap (`src/bin/ref_ring.rs`).
#![cfg(feature = "ref-impl")]

use std::time::Duration;

use rgasnet_tests::run_job;

const PROG: &str = env!("CARGO_BIN_EXE_ref_ring");

#[test]
fn ranks_exchange_library_ids_through_the_bootstrap_and_put_and_get_around_a_ring() {
    for ranks in [2, 4] {
        let out = run_job(
            ranks,
            std::path::Path::new(PROG),
            &[],
            &[("PTL_IFACE_NAME", "lo")],
            Duration::from_secs(120),
        );
        out.assert_success();
        for r in 0..ranks {
            let line = format!("ref ring ok: rank {r} of {ranks}");
            assert!(out.stdout.contains(&line), "no '{line}' in\n{}", out.stdout);
        }
    }
}
