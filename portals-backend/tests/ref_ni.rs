//! One scenario, two engines: the native engine's `Ni` (on UDP loopback) and a Portals 4
//! library's `LibNi` (feature `ref-impl`; CI: Sandia's reference implementation, and
//! rgasnet's own libportals) take the same calls with the same handle types and memory, and
//! must report the same events and move the same bytes. The scenario is what the AM layer
//! asks of its engine: a logical matching NI with a rank map, a flow-controlled portal whose
//! locally managed receive block takes messages one after another until too little is left
//! (`min_free`), then unlinks; a put that finds no block disables the portal and comes back
//! refused; after re-enabling and a new block the resend lands; acknowledgements asked the
//! rgasnet way (`AckReq::Confirmed`); a get from a match entry; a put counted on a CT.
//! One test function: the reference implementation is initialized once per process.
#![cfg(feature = "ref-impl")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

mod common;

use std::time::Duration;

use rgasnet_portals::engine::{
    CtHandle, EqGet, EqHandle, GetArgs, MdHandle, MdSpec, MeHandle, MeSpec, PutArgs, RemoteAddr,
};
use rgasnet_portals::interface::{Interface, Ni};
use rgasnet_portals::refimpl::ni::LibNi;
use rgasnet_portals::types::{
    AckReq, Addressing, CtEvent, Event, EventKind, ListKind, Matching, MdOptions, MeOptions,
    NiFail, NiKind, PhysId, ProcessId, PtIndex, PtOptions, UID_ANY,
};
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint};
use rgasnet_portals::{PtlResult, Region};

/// Each wait's bound: the reference implementation takes milliseconds per operation.
const WAIT: Duration = Duration::from_secs(10);
const AM_PT: PtIndex = 7;
const BLOCK: u64 = 256;
const MIN_FREE: u64 = 64;
const BLOCK_PTR: u64 = 0xb10c;

/// The calls the scenario makes, as both engines offer them.
trait Engine {
    fn set_map(&self, map: &[PhysId]) -> PtlResult<()>;
    fn get_phys_id(&self) -> PtlResult<PhysId>;
    fn eq_alloc(&self, count: usize) -> PtlResult<EqHandle>;
    fn eq_wait(&self, eq: EqHandle, timeout: Option<Duration>) -> PtlResult<EqGet>;
    fn pt_alloc(&self, o: PtOptions, eq: Option<EqHandle>, i: PtIndex) -> PtlResult<PtIndex>;
    fn pt_enable(&self, i: PtIndex) -> PtlResult<()>;
    fn me_append(&self, pt: PtIndex, s: MeSpec, l: ListKind, u: u64) -> PtlResult<MeHandle>;
    fn md_bind(&self, spec: MdSpec) -> PtlResult<MdHandle>;
    fn put(&self, args: &PutArgs) -> PtlResult<()>;
    fn get(&self, args: &GetArgs) -> PtlResult<()>;
    fn ct_alloc(&self) -> PtlResult<CtHandle>;
    fn ct_wait(&self, ct: CtHandle, n: u64, timeout: Option<Duration>) -> PtlResult<CtEvent>;
}

macro_rules! engine_for {
    ($t:ty) => {
        impl Engine for $t {
            fn set_map(&self, map: &[PhysId]) -> PtlResult<()> {
                <$t>::set_map(self, map)
            }
            fn get_phys_id(&self) -> PtlResult<PhysId> {
                <$t>::get_phys_id(self)
            }
            fn eq_alloc(&self, count: usize) -> PtlResult<EqHandle> {
                <$t>::eq_alloc(self, count)
            }
            fn eq_wait(&self, eq: EqHandle, timeout: Option<Duration>) -> PtlResult<EqGet> {
                <$t>::eq_wait(self, eq, timeout)
            }
            fn pt_alloc(
                &self,
                o: PtOptions,
                eq: Option<EqHandle>,
                i: PtIndex,
            ) -> PtlResult<PtIndex> {
                <$t>::pt_alloc(self, o, eq, i)
            }
            fn pt_enable(&self, i: PtIndex) -> PtlResult<()> {
                <$t>::pt_enable(self, i)
            }
            fn me_append(
                &self,
                pt: PtIndex,
                s: MeSpec,
                l: ListKind,
                u: u64,
            ) -> PtlResult<MeHandle> {
                <$t>::me_append(self, pt, s, l, u)
            }
            fn md_bind(&self, spec: MdSpec) -> PtlResult<MdHandle> {
                <$t>::md_bind(self, spec)
            }
            fn put(&self, args: &PutArgs) -> PtlResult<()> {
                <$t>::put(self, args)
            }
            fn get(&self, args: &GetArgs) -> PtlResult<()> {
                <$t>::get(self, args)
            }
            fn ct_alloc(&self) -> PtlResult<CtHandle> {
                <$t>::ct_alloc(self)
            }
            fn ct_wait(
                &self,
                ct: CtHandle,
                n: u64,
                timeout: Option<Duration>,
            ) -> PtlResult<CtEvent> {
                <$t>::ct_wait(self, ct, n, timeout)
            }
        }
    };
}
engine_for!(Ni);
engine_for!(LibNi);

const KIND: NiKind = NiKind {
    matching: Matching::Matching,
    addressing: Addressing::Logical,
};

/// What an event says that both engines must agree on.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    kind: EventKind,
    user_ptr: u64,
    ni_fail: NiFail,
    /// Target side only: where the data landed in the entry, how much, and the match bits
    /// and header data it came with.
    landed: Option<(u64, u64, u64, u64)>,
}

fn seen(ev: &Event) -> Seen {
    let target = matches!(ev.kind, EventKind::Put | EventKind::Get);
    Seen {
        kind: ev.kind,
        user_ptr: ev.user_ptr,
        ni_fail: ev.ni_fail,
        landed: target.then_some((ev.start, ev.mlength, ev.match_bits, ev.hdr_data)),
    }
}

fn next(e: &dyn Engine, eq: EqHandle, what: &str) -> Seen {
    match e.eq_wait(eq, Some(WAIT)).unwrap() {
        EqGet::Event(ev) => seen(&ev),
        other => panic!("{what}: {other:?}"),
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn block_spec(region: &Region) -> MeSpec {
    MeSpec {
        region: region.clone(),
        offset: 0,
        length: BLOCK,
        ct: None,
        uid: UID_ANY,
        options: MeOptions::OP_PUT
            | MeOptions::MANAGE_LOCAL
            | MeOptions::EVENT_LINK_DISABLE
            | MeOptions::MAY_ALIGN,
        match_id: ProcessId::ANY_RANK,
        match_bits: 0x10,
        ignore_bits: 0x0f,
        min_free: MIN_FREE,
    }
}

fn put_args(md: MdHandle, at: u64, len: u64, pt: PtIndex, bits: u64, user_ptr: u64) -> PutArgs {
    PutArgs {
        md,
        local_offset: at,
        length: len,
        ack_req: AckReq::Confirmed,
        remote: RemoteAddr {
            target: ProcessId::Rank(0),
            pt_index: pt,
            match_bits: bits,
            remote_offset: 0,
        },
        user_ptr,
        hdr_data: 0xa000 + user_ptr,
    }
}

/// The scenario (see the crate docs) on `e`, an NI of [`KIND`]: every event it saw, in
/// order, after checking the bytes each operation moved.
fn scenario(e: &dyn Engine) -> Vec<Seen> {
    let me = e.get_phys_id().unwrap();
    e.set_map(&[me]).unwrap();
    let recv_eq = e.eq_alloc(64).unwrap();
    let send_eq = e.eq_alloc(64).unwrap();
    assert_eq!(
        e.pt_alloc(PtOptions::FLOWCTRL, Some(recv_eq), AM_PT)
            .unwrap(),
        AM_PT
    );
    let block = Region::new(BLOCK as usize);
    e.me_append(AM_PT, block_spec(&block), ListKind::Priority, BLOCK_PTR)
        .unwrap();
    let source = Region::new(1024);
    let bytes = pattern(1024, 7);
    source.write(0, &bytes).unwrap();
    let md = e
        .md_bind(MdSpec {
            region: source.clone(),
            offset: 0,
            length: 1024,
            options: MdOptions::EVENT_SEND_DISABLE,
            eq: Some(send_eq),
            ct: None,
        })
        .unwrap();
    let mut log = Vec::new();
    let landed = |at: u64, from: usize, len: usize, region: &Region| {
        let mut got = vec![0u8; len];
        region.read(at as usize, &mut got).unwrap();
        assert_eq!(got, bytes[from..from + len], "{len} bytes at {at}");
    };

    // Three messages fill the block one after another; after the third, less than
    // `MIN_FREE` is left and the block unlinks.
    for (i, (from, len)) in [(0u64, 40u64), (40, 100), (140, 100)]
        .into_iter()
        .enumerate()
    {
        let user_ptr = i as u64 + 1;
        e.put(&put_args(md, from, len, AM_PT, 0x13, user_ptr))
            .unwrap();
        let arrived = next(e, recv_eq, "arrival");
        let (start, mlength, _, _) = arrived.landed.unwrap();
        assert_eq!(mlength, len);
        landed(start, from as usize, len as usize, &block);
        log.push(arrived);
        log.push(next(e, send_eq, "ack"));
    }
    log.push(next(e, recv_eq, "unlink"));

    // No block: the portal disables itself and the put comes back refused.
    e.put(&put_args(md, 300, 8, AM_PT, 0x14, 4)).unwrap();
    log.push(next(e, recv_eq, "pt disabled"));
    log.push(next(e, send_eq, "refusal"));
    // A new block, the portal enabled again: the resend lands at the block's start.
    let block2 = Region::new(BLOCK as usize);
    e.me_append(
        AM_PT,
        block_spec(&block2),
        ListKind::Priority,
        BLOCK_PTR + 1,
    )
    .unwrap();
    e.pt_enable(AM_PT).unwrap();
    e.put(&put_args(md, 300, 8, AM_PT, 0x14, 5)).unwrap();
    let arrived = next(e, recv_eq, "resend");
    landed(arrived.landed.unwrap().0, 300, 8, &block2);
    log.push(arrived);
    log.push(next(e, send_eq, "resend ack"));

    // A get from a match entry of its own portal, and a put counted on a CT there.
    let data_eq = e.eq_alloc(16).unwrap();
    let data_pt = e.pt_alloc(PtOptions::empty(), Some(data_eq), 8).unwrap();
    let exposed = Region::new(128);
    exposed.write(0, &bytes[500..628]).unwrap();
    let ct = e.ct_alloc().unwrap();
    e.me_append(
        data_pt,
        MeSpec {
            region: exposed.clone(),
            offset: 0,
            length: 128,
            ct: Some(ct),
            uid: UID_ANY,
            options: MeOptions::OP_PUT
                | MeOptions::OP_GET
                | MeOptions::EVENT_LINK_DISABLE
                | MeOptions::EVENT_CT_COMM,
            match_id: ProcessId::ANY_RANK,
            match_bits: 0x20,
            ignore_bits: 0,
            min_free: 0,
        },
        ListKind::Priority,
        0xe0,
    )
    .unwrap();
    let sink = Region::new(64);
    let sink_md = e
        .md_bind(MdSpec {
            region: sink.clone(),
            offset: 0,
            length: 64,
            options: MdOptions::EVENT_SEND_DISABLE,
            eq: Some(send_eq),
            ct: None,
        })
        .unwrap();
    e.get(&GetArgs {
        md: sink_md,
        local_offset: 16,
        length: 32,
        remote: RemoteAddr {
            target: ProcessId::Rank(0),
            pt_index: data_pt,
            match_bits: 0x20,
            remote_offset: 8,
        },
        user_ptr: 6,
    })
    .unwrap();
    let got = next(e, data_eq, "get at the target");
    assert_eq!(got.landed.map(|l| (l.0, l.1)), Some((8, 32)));
    log.push(got);
    log.push(next(e, send_eq, "reply"));
    let mut read = vec![0u8; 32];
    sink.read(16, &mut read).unwrap();
    assert_eq!(read, bytes[508..540], "the get's bytes");
    assert_eq!(e.ct_wait(ct, 1, Some(WAIT)).unwrap().success, 1);

    let mut counted = put_args(md, 600, 16, data_pt, 0x20, 7);
    counted.remote.remote_offset = 100;
    e.put(&counted).unwrap();
    assert_eq!(
        e.ct_wait(ct, 2, Some(WAIT)).unwrap(),
        CtEvent {
            success: 2,
            failure: 0
        }
    );
    log.push(next(e, data_eq, "counted put"));
    log.push(next(e, send_eq, "counted put's ack"));
    landed(100, 600, 16, &exposed);
    log
}

/// What the scenario must see on either engine.
fn expected() -> Vec<Seen> {
    // An arrival in entry `user_ptr`: where, how much, its match bits, and the header data
    // of the put with user pointer `put`.
    let arrival = |user_ptr, start, len, bits, put: u64| Seen {
        kind: EventKind::Put,
        user_ptr,
        ni_fail: NiFail::Ok,
        landed: Some((start, len, bits, 0xa000 + put)),
    };
    let ack = |user_ptr, ni_fail| Seen {
        kind: EventKind::Ack,
        user_ptr,
        ni_fail,
        landed: None,
    };
    vec![
        arrival(BLOCK_PTR, 0, 40, 0x13, 1),
        ack(1, NiFail::Ok),
        arrival(BLOCK_PTR, 40, 100, 0x13, 2),
        ack(2, NiFail::Ok),
        arrival(BLOCK_PTR, 140, 100, 0x13, 3),
        ack(3, NiFail::Ok),
        Seen {
            kind: EventKind::AutoUnlink,
            user_ptr: BLOCK_PTR,
            ni_fail: NiFail::Ok,
            landed: None,
        },
        Seen {
            kind: EventKind::PtDisabled,
            user_ptr: 0,
            ni_fail: NiFail::PtDisabled,
            landed: None,
        },
        ack(4, NiFail::PtDisabled),
        arrival(BLOCK_PTR + 1, 0, 8, 0x14, 5),
        ack(5, NiFail::Ok),
        Seen {
            kind: EventKind::Get,
            user_ptr: 0xe0,
            ni_fail: NiFail::Ok,
            landed: Some((8, 32, 0x20, 0)),
        },
        Seen {
            kind: EventKind::Reply,
            user_ptr: 6,
            ni_fail: NiFail::Ok,
            landed: None,
        },
        arrival(0xe0, 100, 16, 0x20, 7),
        ack(7, NiFail::Ok),
    ]
}

#[test]
fn native_engine_and_portals_library_agree_on_the_am_layers_calls() {
    std::env::set_var("PTL_IFACE_NAME", "lo");
    let endpoint = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    let iface =
        Interface::new(common::config(Duration::from_secs(30)), Box::new(endpoint)).unwrap();
    let native = iface.ni_init(KIND, None).unwrap();
    let library = LibNi::init(KIND).unwrap();

    let on_native = scenario(&native);
    let on_library = scenario(&library);
    let want = expected();
    assert_eq!(on_native, want, "the native engine");
    assert_eq!(on_library, want, "the Portals library");
}
