//! Engine tests: 2–4 engines connected by a tiny in-order router, checked on target memory
//! bytes, exact events and counter values.

mod atomics;
mod basics;
mod flowctrl;
mod immediates;
mod matching;
mod robustness;
mod unexpected_triggered;

use super::*;
use crate::memory::Region;
use crate::types::{
    AckReq, CtEvent, Event, EventKind, ListKind, MdOptions, MeOptions, NiFail, PtOptions,
};

pub(super) const MATCHING_PHYS: NiKind = NiKind {
    matching: Matching::Matching,
    addressing: Addressing::Physical,
};
pub(super) const MATCHING_LOGICAL: NiKind = NiKind {
    matching: Matching::Matching,
    addressing: Addressing::Logical,
};
pub(super) const NOMATCH_PHYS: NiKind = NiKind {
    matching: Matching::NoMatching,
    addressing: Addressing::Physical,
};

pub(super) const UID: Uid = 1000;

/// Engines 0..n at 127.0.0.1:(7000 + i), each with an NI of one kind.
pub(super) struct Net {
    pub(super) e: Vec<Engine>,
    pub(super) ni: Vec<NiHandle>,
}

pub(super) fn phys(i: usize) -> PhysId {
    PhysId {
        nid: 0x7f00_0001,
        pid: 7000 + i as u32,
    }
}

impl Net {
    pub(super) fn new(n: usize, kind: NiKind) -> Net {
        let mut e = Vec::new();
        let mut ni = Vec::new();
        for i in 0..n {
            let mut engine = Engine::new(phys(i), UID, 10 + i as u32);
            let (h, _) = engine.ni_init(kind, None).unwrap();
            if kind.addressing == Addressing::Logical {
                let map: Vec<PhysId> = (0..n).map(phys).collect();
                engine.set_map(h, &map).unwrap();
            }
            e.push(engine);
            ni.push(h);
        }
        Net { e, ni }
    }

    /// Moves one message out of engine `i` into its destination. Returns false if `i` had none.
    pub(super) fn step(&mut self, i: usize) -> bool {
        let Some((to, bytes)) = self.e[i].poll_outgoing() else {
            return false;
        };
        let dst = (0..self.e.len())
            .find(|&j| phys(j) == to)
            .expect("message to an unknown interface");
        self.e[dst].handle_message(phys(i), &bytes.to_bytes());
        true
    }

    /// Delivers messages round-robin (one per engine per turn, so initiators interleave) until
    /// every queue is empty. Returns how many moved; bounded so a bug fails, not hangs.
    pub(super) fn run(&mut self) -> usize {
        let mut moved = 0;
        loop {
            let mut any = false;
            for i in 0..self.e.len() {
                if self.step(i) {
                    any = true;
                    moved += 1;
                }
            }
            if !any {
                return moved;
            }
            assert!(moved < 10_000_000, "router did not go quiet");
        }
    }

    pub(super) fn eq(&mut self, i: usize, count: usize) -> EqHandle {
        self.e[i].eq_alloc(self.ni[i], count).unwrap()
    }

    pub(super) fn ct(&mut self, i: usize) -> CtHandle {
        self.e[i].ct_alloc(self.ni[i]).unwrap()
    }

    pub(super) fn pt(&mut self, i: usize, index: u32, opts: PtOptions, eq: Option<EqHandle>) {
        assert_eq!(
            self.e[i].pt_alloc(self.ni[i], opts, eq, index).unwrap(),
            index
        );
    }

    /// An MD over all of `region`.
    pub(super) fn md(
        &mut self,
        i: usize,
        region: &Region,
        options: MdOptions,
        eq: Option<EqHandle>,
        ct: Option<CtHandle>,
    ) -> MdHandle {
        let spec = MdSpec {
            region: region.clone(),
            offset: 0,
            length: region.len() as u64,
            options,
            eq,
            ct,
        };
        self.e[i].md_bind(self.ni[i], spec).unwrap()
    }

    pub(super) fn me(
        &mut self,
        i: usize,
        pt: u32,
        spec: MeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> MeHandle {
        self.e[i]
            .me_append(self.ni[i], pt, spec, list, user_ptr)
            .unwrap()
    }

    /// Every event waiting in `eq`, asserting none was dropped.
    pub(super) fn events(&mut self, i: usize, eq: EqHandle) -> Vec<Event> {
        let mut out = Vec::new();
        loop {
            match self.e[i].eq_get(eq).unwrap() {
                EqGet::Event(ev) => out.push(ev),
                EqGet::Dropped(ev) => panic!("unexpected EQ drop before {ev:?}"),
                EqGet::Empty => return out,
            }
        }
    }

    pub(super) fn status(&self, i: usize, sr: SrIndex) -> u64 {
        self.e[i].ni_status(self.ni[i], sr).unwrap()
    }
}

/// A match entry over all of `region` matching exactly `bits` from anyone.
pub(super) fn me_spec(region: &Region, bits: u64, options: MeOptions) -> MeSpec {
    MeSpec {
        region: region.clone(),
        offset: 0,
        length: region.len() as u64,
        ct: None,
        uid: crate::types::UID_ANY,
        options,
        match_id: ProcessId::ANY_PHYS,
        match_bits: bits,
        ignore_bits: 0,
        min_free: 0,
    }
}

pub(super) fn put_args(
    md: MdHandle,
    len: u64,
    ack: AckReq,
    to: ProcessId,
    pt: u32,
    bits: u64,
) -> PutArgs {
    PutArgs {
        md,
        local_offset: 0,
        length: len,
        ack_req: ack,
        remote: RemoteAddr {
            target: to,
            pt_index: pt,
            match_bits: bits,
            remote_offset: 0,
        },
        user_ptr: 0xabc,
        hdr_data: 0x1234,
    }
}

/// The event every test expects for an operation, to be adjusted field by field.
pub(super) fn ev(kind: EventKind) -> Event {
    super::events::blank(kind)
}

pub(super) fn ct_value(success: u64, failure: u64) -> CtEvent {
    CtEvent { success, failure }
}

pub(super) fn p(i: usize) -> ProcessId {
    ProcessId::Phys(phys(i))
}
