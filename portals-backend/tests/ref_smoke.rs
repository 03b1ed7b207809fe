//! Smoke test of the Portals library path (feature `ref-impl`): `PtlInit`, `PtlNIInit` and
//! `PtlFini` of the library `PORTALS4_DIR` names (CI: the reference implementation built from
//! `../shared/vendor` by `scripts/portals4-ref.sh`), on loopback. One test function: the
//! reference implementation cannot be initialized twice in one process.
#![cfg(feature = "ref-impl")]

use std::net::Ipv4Addr;

use rgasnet_portals::refimpl::probe;
use rgasnet_portals::types::{Addressing, Matching, NiKind};

#[test]
fn physical_nis_open_on_loopback_with_the_standard_limits() {
    let kind = |matching| NiKind {
        matching,
        addressing: Addressing::Physical,
    };
    let logical = NiKind {
        matching: Matching::Matching,
        addressing: Addressing::Logical,
    };
    // Refused before the library is touched.
    let e = probe(&[logical]).unwrap_err().to_string();
    assert!(e.contains("rank map"), "{e}");

    // The reference implementation picks its interface from PTL_IFACE_NAME.
    std::env::set_var("PTL_IFACE_NAME", "lo");
    let kinds = [kind(Matching::NoMatching), kind(Matching::Matching)];
    let probes = probe(&kinds).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(probes.len(), 2);
    for p in &probes {
        assert_eq!(Ipv4Addr::from(p.id.nid), Ipv4Addr::LOCALHOST, "{p:?}");
        assert!(p.id.pid > 0 && p.id.pid < 65_536, "{p:?}");
        // Portals 4 guarantees at least 64 portal table entries.
        assert!(p.limits.max_pt_index >= 63, "{p:?}");
        assert!(p.limits.max_msg_size >= 65_536, "{p:?}");
        assert!(p.limits.max_entries > 0 && p.limits.max_mds > 0, "{p:?}");
    }

    // A reference-implementation limit (not a bug of ours), shown here so that a library
    // that lifts it is noticed: once finalized, it cannot be initialized again.
    let again = probe(&kinds[..1]).unwrap_err().to_string();
    assert!(
        again.contains("PtlInit") && again.contains("PTL_FAIL"),
        "{again}"
    );
}
