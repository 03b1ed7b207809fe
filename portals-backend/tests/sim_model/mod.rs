//! The model and the per-engine application of the mixed-operation simulation test: the
//! script of operations, what each one must produce, and the node that runs them.

#![allow(clippy::unwrap_used)] // test code: a failed call is a failed test

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use rgasnet_portals::types::{
    AckReq, Addressing, AtomicOp, AtomicType, Event, EventKind, ListKind, Matching, NiFail, NiKind,
    ProcessId,
};

pub(crate) const SEED: u64 = 0x5eed_d00d_2024;
pub(crate) const NODES: usize = 4;
pub(crate) const OPS_PER_NODE: usize = 2500;
/// Operations a node keeps outstanding (awaiting their ack, reply or counted ack).
pub(crate) const WINDOW: usize = 8;
/// Largest put; each put has its own slot of this size at its target.
pub(crate) const PUT_SLOT: usize = 3000;
/// Size of each target's read-only get source.
pub(crate) const GET_SRC: usize = 16_384;
/// Largest get.
pub(crate) const GET_MAX: usize = 2048;
/// Payload of a put to the flow-controlled portal.
pub(crate) const FC_PAYLOAD: usize = 48;
/// Receive block of the flow-controlled portal: six payloads, then it unlinks.
pub(crate) const FC_BLOCK: usize = FC_PAYLOAD * 6;
/// Blocks a target keeps posted: one, so that bursts exhaust it.
const FC_LIVE: usize = 1;

pub(crate) const PT_RMA: u32 = 0;
pub(crate) const PT_FC: u32 = 1;
/// Class in the top byte of the match bits; the low 56 bits carry the operation id (gets have
/// no `hdr_data`, so this is how a target event names its operation).
const CLASS_PUT: u64 = 1 << 56;
const CLASS_GET: u64 = 2 << 56;
const CLASS_ATOMIC: u64 = 3 << 56;
const ID_MASK: u64 = (1 << 56) - 1;
/// user_ptr of the three RMA entries.
const ME_PUT: u64 = 0x100;
const ME_GET: u64 = 0x200;
const ME_ATOMIC: u64 = 0x300;
/// Layout of each target's atomic region: SUM counter, fetch-add counter, one swap slot per
/// initiator.
const SUM_OFF: u64 = 0;
const FETCH_OFF: u64 = 8;
const SWAP_OFF: u64 = 16;
const ATOMIC_LEN: usize = 16 + 8 * NODES;
pub(crate) const UID: u32 = 4242;

const KIND: NiKind = NiKind {
    matching: Matching::Matching,
    addressing: Addressing::Logical,
};

/// One operation of the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `len` bytes into slot `slot` of the initiator's put area at the target.
    Put {
        len: usize,
        ack: AckReq,
        slot: usize,
    },
    /// `len` bytes from `offset` of the target's get source into `land` of the initiator's
    /// landing region.
    Get {
        offset: usize,
        len: usize,
        land: usize,
    },
    /// Atomic SUM of `v` into the target's SUM counter (u64).
    Sum { v: u64 },
    /// Fetch-atomic SUM of `v` into the fetch-add counter; the old value lands at `land`.
    FetchSum { v: u64, land: usize },
    /// SWAP of `v` into the initiator's swap slot; `prev` must come back, at `land`.
    Swap { v: u64, prev: u64, land: usize },
    /// `FC_PAYLOAD` bytes to the flow-controlled portal, resent until accepted.
    Fc,
}

/// An operation: its id (= index in the script, also `user_ptr` and `hdr_data`), who issues
/// it and where it goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    pub(crate) id: u64,
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) kind: Kind,
}

/// Every node's operations, generated from [`SEED`].
pub(crate) struct Script {
    pub(crate) ops: Vec<Op>,
    /// Put slots per (initiator, target) pair (the largest over all pairs).
    pub(crate) put_slots: usize,
    /// Landing bytes each node needs.
    pub(crate) land_len: Vec<usize>,
}

impl Script {
    pub(crate) fn generate() -> Script {
        let mut rng = StdRng::seed_from_u64(SEED);
        let mut slots = [[0usize; NODES]; NODES];
        let mut last_swap = [[0u64; NODES]; NODES];
        let mut land = vec![0usize; NODES];
        let mut ops = Vec::with_capacity(NODES * OPS_PER_NODE);
        for from in 0..NODES {
            for k in 0..OPS_PER_NODE {
                let id = (from * OPS_PER_NODE + k) as u64;
                let to = rng.random_range(0..NODES);
                let kind = match rng.random_range(0..100u32) {
                    0..30 => {
                        let len = if rng.random_bool(0.5) {
                            rng.random_range(1..=64)
                        } else {
                            rng.random_range(1..=PUT_SLOT)
                        };
                        let ack = match rng.random_range(0..20u32) {
                            0..14 => AckReq::Ack,
                            14..17 => AckReq::CtAck,
                            _ => AckReq::None,
                        };
                        let slot = slots[from][to];
                        slots[from][to] += 1;
                        Kind::Put { len, ack, slot }
                    }
                    30..45 => {
                        let len = rng.random_range(1..=GET_MAX);
                        let offset = rng.random_range(0..=GET_SRC - len);
                        let at = land[from];
                        land[from] += len;
                        Kind::Get {
                            offset,
                            len,
                            land: at,
                        }
                    }
                    45..55 => Kind::Sum {
                        v: u64::from(rng.random::<u32>()),
                    },
                    55..65 => {
                        let at = land[from];
                        land[from] += 8;
                        Kind::FetchSum {
                            v: u64::from(rng.random::<u32>()) + 1,
                            land: at,
                        }
                    }
                    65..75 => {
                        let at = land[from];
                        land[from] += 8;
                        let v = (id + 1).wrapping_mul(0x0001_0003_0007_000b);
                        let prev = last_swap[from][to];
                        last_swap[from][to] = v;
                        Kind::Swap { v, prev, land: at }
                    }
                    _ => Kind::Fc,
                };
                ops.push(Op { id, from, to, kind });
            }
        }
        let put_slots = slots.iter().flatten().copied().max().unwrap_or(0);
        Script {
            ops,
            put_slots,
            land_len: land,
        }
    }
}

/// Byte `i` of the payload of operation `id` (puts and flow-controlled puts).
pub(crate) fn payload_byte(id: u64, i: usize) -> u8 {
    let h = id.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17);
    (h as usize).wrapping_add(i.wrapping_mul(131)) as u8 ^ (i >> 8) as u8
}

fn payload(id: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| payload_byte(id, i)).collect()
}

/// Byte `i` of target `node`'s get source.
pub(crate) fn get_src_byte(node: usize, i: usize) -> u8 {
    (node * 89 + i * 7 + (i >> 9)) as u8
}

/// Facts gathered while the simulation runs, checked at the end.
pub(crate) struct Ledger {
    pub(crate) sent: Vec<u32>,
    pub(crate) completed: Vec<u32>,
    pub(crate) target_seen: Vec<u32>,
    pub(crate) fc_refused: Vec<u32>,
    pub(crate) fc_landing: Vec<Option<(usize, u64)>>,
    pub(crate) fc_ack_offset: Vec<Option<u64>>,
    pub(crate) fetched: Vec<Option<u64>>,
    /// PT_DISABLED acks per target.
    pub(crate) pt_disabled_acks: [u64; NODES],
    pub(crate) pt_disabled_events: u64,
    pub(crate) resends: u64,
    pub(crate) enables: u64,
    pub(crate) auto_unlinks: u64,
}

impl Ledger {
    pub(crate) fn new(n: usize) -> Ledger {
        Ledger {
            sent: vec![0; n],
            completed: vec![0; n],
            target_seen: vec![0; n],
            fc_refused: vec![0; n],
            fc_landing: vec![None; n],
            fc_ack_offset: vec![None; n],
            fetched: vec![None; n],
            pt_disabled_acks: [0; NODES],
            pt_disabled_events: 0,
            resends: 0,
            enables: 0,
            auto_unlinks: 0,
        }
    }
}

/// Where an operation goes and what describes it in every event.
struct Shape {
    pt_index: u32,
    match_bits: u64,
    remote_offset: u64,
    length: u64,
    atomic: Option<(AtomicOp, AtomicType)>,
    /// `hdr_data` (gets carry none).
    hdr_data: u64,
}

fn shape(op: &Op, put_slots: usize) -> Shape {
    let id = op.id;
    let (pt_index, match_bits, remote_offset, length, atomic, hdr_data) = match op.kind {
        Kind::Put { len, slot, .. } => {
            let off = ((op.from * put_slots + slot) * PUT_SLOT) as u64;
            (PT_RMA, CLASS_PUT | id, off, len as u64, None, id)
        }
        Kind::Get { offset, len, .. } => {
            (PT_RMA, CLASS_GET | id, offset as u64, len as u64, None, 0)
        }
        Kind::Sum { .. } => (
            PT_RMA,
            CLASS_ATOMIC | id,
            SUM_OFF,
            8,
            Some((AtomicOp::Sum, AtomicType::Uint64)),
            id,
        ),
        Kind::FetchSum { .. } => (
            PT_RMA,
            CLASS_ATOMIC | id,
            FETCH_OFF,
            8,
            Some((AtomicOp::Sum, AtomicType::Uint64)),
            id,
        ),
        Kind::Swap { .. } => (
            PT_RMA,
            CLASS_ATOMIC | id,
            SWAP_OFF + 8 * op.from as u64,
            8,
            Some((AtomicOp::Swap, AtomicType::Int64)),
            id,
        ),
        Kind::Fc => (PT_FC, id, 0, FC_PAYLOAD as u64, None, id),
    };
    Shape {
        pt_index,
        match_bits,
        remote_offset,
        length,
        atomic,
        hdr_data,
    }
}

/// An event with the fields every event of `op` shares.
fn base_event(kind: EventKind, op: &Op, initiator: ProcessId, put_slots: usize) -> Event {
    let s = shape(op, put_slots);
    Event {
        kind,
        start: 0,
        user_ptr: 0,
        hdr_data: s.hdr_data,
        match_bits: s.match_bits,
        rlength: s.length,
        mlength: s.length,
        remote_offset: s.remote_offset,
        initiator,
        uid: UID,
        pt_index: s.pt_index,
        list: ListKind::Priority,
        ni_fail: NiFail::Ok,
        atomic_op: s.atomic.map(|a| a.0),
        atomic_type: s.atomic.map(|a| a.1),
    }
}

mod node;
pub(crate) use node::Node;
