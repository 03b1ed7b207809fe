//! Stacks wired back to back for the acknowledgement tests (no sockets, virtual time): each
//! side is an engine on a transport with one event queue, a source MD and a sink region that
//! list entries cover.

#![allow(dead_code)] // each test crate uses its own subset
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

use std::time::Instant;

use rgasnet_portals::engine::{
    CtHandle, Engine, EqHandle, MdHandle, MdSpec, MeSpec, NiHandle, PutArgs, RemoteAddr,
};
use rgasnet_portals::stack::Stack;
use rgasnet_portals::transport::{Transport, TransportConfig};
use rgasnet_portals::types::{
    AckReq, Addressing, ListKind, Matching, MdOptions, MeOptions, NiKind, PhysId, ProcessId,
    PtOptions, RANK_ANY,
};
use rgasnet_portals::Region;

const KIND: NiKind = NiKind {
    matching: Matching::Matching,
    addressing: Addressing::Logical,
};
const UID: u32 = 7;

/// One interface of the test.
pub(crate) struct Side {
    pub(crate) stack: Stack,
    /// The NI.
    pub(crate) ni: NiHandle,
    pub(crate) eq: EqHandle,
    pub(crate) md: MdHandle,
    /// What puts send from (the MD's region).
    pub(crate) src: Region,
    /// What the list entries cover.
    pub(crate) sink: Region,
}

/// The interface of rank `i`.
pub(crate) fn phys(i: u32) -> PhysId {
    PhysId {
        nid: 0x7f00_0001,
        pid: 5000 + i,
    }
}

/// A portal of a side: its index, its options, and whether a list entry over the sink (any
/// initiator, any match bits) is appended to it.
pub(crate) struct Portal {
    pub(crate) index: u32,
    pub(crate) options: PtOptions,
    pub(crate) with_entry: bool,
}

/// Rank `i` of a job of `ranks`, with `portals`.
pub(crate) fn side(i: u32, ranks: u32, now: Instant, portals: &[Portal]) -> Side {
    let map: Vec<PhysId> = (0..ranks).map(phys).collect();
    let cfg = TransportConfig {
        job_key: 0x1a2b,
        ..Default::default()
    };
    let transport = Transport::new(cfg, phys(i), 0x100 + u64::from(i), now).unwrap();
    let mut e = Engine::new(phys(i), UID, 10 + i);
    let (ni, _) = e.ni_init(KIND, None).unwrap();
    e.set_map(ni, &map).unwrap();
    let eq = e.eq_alloc(ni, 256).unwrap();
    let sink = Region::new(4096);
    for p in portals {
        e.pt_alloc(ni, p.options, Some(eq), p.index).unwrap();
        if p.with_entry {
            let spec = MeSpec {
                region: sink.clone(),
                offset: 0,
                length: sink.len() as u64,
                ct: None,
                uid: UID,
                options: MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE,
                match_id: ProcessId::Rank(RANK_ANY),
                match_bits: 0,
                ignore_bits: 0,
                min_free: 0,
            };
            e.me_append(ni, p.index, spec, ListKind::Priority, 0)
                .unwrap();
        }
    }
    let src = Region::new(4096);
    let md = e
        .md_bind(
            ni,
            MdSpec {
                region: src.clone(),
                offset: 0,
                length: 4096,
                options: MdOptions::EVENT_SEND_DISABLE,
                eq: Some(eq),
                ct: None::<CtHandle>,
            },
        )
        .unwrap();
    Side {
        stack: Stack::new(e, transport),
        ni,
        eq,
        md,
        src,
        sink,
    }
}

/// Where a put goes and what it asks for.
#[derive(Clone, Copy)]
pub(crate) struct PutTo {
    pub(crate) rank: u32,
    pub(crate) pt: u32,
    pub(crate) match_bits: u64,
    pub(crate) offset: u64,
    pub(crate) ack: AckReq,
    pub(crate) user_ptr: u64,
}

/// The engine's part of a put of `bytes` (the caller pumps).
pub(crate) fn engine_put(s: &mut Side, to: PutTo, bytes: &[u8]) {
    s.src.write(0, bytes).unwrap();
    s.stack
        .engine
        .put(&PutArgs {
            md: s.md,
            local_offset: 0,
            length: bytes.len() as u64,
            ack_req: to.ack,
            remote: RemoteAddr {
                target: ProcessId::Rank(to.rank),
                pt_index: to.pt,
                match_bits: to.match_bits,
                remote_offset: to.offset,
            },
            user_ptr: to.user_ptr,
            hdr_data: 0,
        })
        .unwrap();
}
