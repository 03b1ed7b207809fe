//! One simulated engine and the application that drives it: issues its script, checks every
//! event against the model, and plays the target's part of flow control.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use rgasnet_portals::engine::{
    AtomicArgs, CtHandle, Engine, EqGet, EqHandle, FetchArgs, GetArgs, MdHandle, MdSpec, MeSpec,
    NiHandle, PutArgs, RemoteAddr,
};
use rgasnet_portals::stack::Stack;
use rgasnet_portals::transport::{Transport, TransportConfig};
use rgasnet_portals::types::{
    AckReq, AtomicOp, AtomicType, Event, EventKind, ListKind, MdOptions, MeOptions, NiFail, PhysId,
    ProcessId, PtOptions,
};
use rgasnet_portals::Region;

use super::*;

/// One engine, its transport, and the application that drives it.
pub(crate) struct Node {
    pub(crate) idx: usize,
    pub(crate) stack: Stack,
    pub(crate) ni: NiHandle,
    eq_i: EqHandle,
    eq_t: EqHandle,
    eq_fc: EqHandle,
    ct: CtHandle,
    md_full: MdHandle,
    md_ct: MdHandle,
    md_land: MdHandle,
    src: Region,
    land: Region,
    put_area: Region,
    get_src: Region,
    atomics: Region,
    blocks: Vec<Region>,
    block_live: Vec<bool>,
    live: usize,
    script: Rc<Script>,
    ledger: Rc<RefCell<Ledger>>,
    pub(crate) next_op: usize,
    pub(crate) in_flight: usize,
    ct_issued: u64,
    pub(crate) resend: Vec<u64>,
}

fn me(region: &Region, bits: u64, ignore: u64, options: MeOptions) -> MeSpec {
    MeSpec {
        region: region.clone(),
        offset: 0,
        length: region.len() as u64,
        ct: None,
        uid: UID,
        options,
        match_id: ProcessId::ANY_RANK,
        match_bits: bits,
        ignore_bits: ignore,
        min_free: 0,
    }
}

impl Node {
    pub(crate) fn new(
        idx: usize,
        map: &[PhysId],
        cfg: TransportConfig,
        now: Instant,
        script: &Rc<Script>,
        ledger: &Rc<RefCell<Ledger>>,
    ) -> Node {
        let local = map[idx];
        let transport = Transport::new(cfg, local, 0x1000 + idx as u64, now).unwrap();
        let mut e = Engine::new(local, UID, 100 + idx as u32);
        let (ni, _) = e.ni_init(KIND, None).unwrap();
        e.set_map(ni, map).unwrap();
        let eq_i = e.eq_alloc(ni, 1024).unwrap();
        let eq_t = e.eq_alloc(ni, 4096).unwrap();
        let eq_fc = e.eq_alloc(ni, 64).unwrap();
        let ct = e.ct_alloc(ni).unwrap();
        assert_eq!(
            e.pt_alloc(ni, PtOptions::empty(), Some(eq_t), PT_RMA)
                .unwrap(),
            PT_RMA
        );
        assert_eq!(
            e.pt_alloc(ni, PtOptions::FLOWCTRL, Some(eq_fc), PT_FC)
                .unwrap(),
            PT_FC
        );

        let put_area = Region::new(NODES * script.put_slots * PUT_SLOT);
        let get_src = Region::new(GET_SRC);
        for i in 0..GET_SRC {
            get_src.write(i, &[get_src_byte(idx, i)]).unwrap();
        }
        let atomics = Region::new(ATOMIC_LEN);
        let quiet = MeOptions::EVENT_LINK_DISABLE;
        let entries = [
            (&put_area, CLASS_PUT, MeOptions::OP_PUT, ME_PUT),
            (&get_src, CLASS_GET, MeOptions::OP_GET, ME_GET),
            (
                &atomics,
                CLASS_ATOMIC,
                MeOptions::OP_PUT | MeOptions::OP_GET,
                ME_ATOMIC,
            ),
        ];
        for (region, class, ops, user_ptr) in entries {
            e.me_append(
                ni,
                PT_RMA,
                me(region, class, ID_MASK, ops | quiet),
                ListKind::Priority,
                user_ptr,
            )
            .unwrap();
        }

        let src = Region::new(PUT_SLOT);
        let land = Region::new(script.land_len[idx].max(1));
        let md = |e: &mut Engine, region: &Region, options, ct| {
            let spec = MdSpec {
                region: region.clone(),
                offset: 0,
                length: region.len() as u64,
                options,
                eq: Some(eq_i),
                ct,
            };
            e.md_bind(ni, spec).unwrap()
        };
        let md_full = md(&mut e, &src, MdOptions::empty(), None);
        let md_ct = md(&mut e, &src, MdOptions::EVENT_CT_ACK, Some(ct));
        let md_land = md(&mut e, &land, MdOptions::empty(), None);
        Node {
            idx,
            stack: Stack::new(e, transport),
            ni,
            eq_i,
            eq_t,
            eq_fc,
            ct,
            md_full,
            md_ct,
            md_land,
            src,
            land,
            put_area,
            get_src,
            atomics,
            blocks: Vec::new(),
            block_live: Vec::new(),
            live: 0,
            script: script.clone(),
            ledger: ledger.clone(),
            next_op: 0,
            in_flight: 0,
            ct_issued: 0,
            resend: Vec::new(),
        }
    }

    fn my_ops(&self) -> &[Op] {
        &self.script.ops[self.idx * OPS_PER_NODE..(self.idx + 1) * OPS_PER_NODE]
    }

    /// Drains all three event queues, checking each event. Returns whether any was found.
    pub(crate) fn drain(&mut self) -> bool {
        let mut any = false;
        for eq in [self.eq_i, self.eq_t, self.eq_fc] {
            loop {
                let ev = match self.stack.engine.eq_get(eq).unwrap() {
                    EqGet::Event(ev) => ev,
                    EqGet::Dropped(ev) => panic!("node {}: EQ overflow before {ev:?}", self.idx),
                    EqGet::Empty => break,
                };
                any = true;
                if eq == self.eq_i {
                    self.on_initiator(ev);
                } else if eq == self.eq_t {
                    self.on_target(ev);
                } else {
                    self.on_flow(ev);
                }
            }
        }
        any
    }

    fn on_initiator(&mut self, ev: Event) {
        let op = self.script.ops[ev.user_ptr as usize];
        assert_eq!(op.from, self.idx, "{ev:?}");
        let target = ProcessId::Rank(op.to as u32);
        let mut want = base_event(ev.kind, &op, target, self.script.put_slots);
        want.user_ptr = op.id;
        let mut l = self.ledger.borrow_mut();
        if ev.kind == EventKind::Send {
            assert!(!matches!(op.kind, Kind::Get { .. }));
            assert_eq!(ev, want, "SEND of {op:?}");
            l.sent[op.id as usize] += 1;
            return;
        }
        match op.kind {
            Kind::Put { .. } | Kind::Sum { .. } | Kind::Fc => want.kind = EventKind::Ack,
            _ => want.kind = EventKind::Reply,
        }
        if let Kind::Get { land, .. } | Kind::FetchSum { land, .. } | Kind::Swap { land, .. } =
            op.kind
        {
            want.start = land as u64;
        }
        if matches!(op.kind, Kind::Fc) {
            if ev.ni_fail == NiFail::PtDisabled {
                want.ni_fail = NiFail::PtDisabled;
                want.mlength = 0;
                assert_eq!(ev, want, "refused {op:?}");
                l.pt_disabled_acks[op.to] += 1;
                l.fc_refused[op.id as usize] += 1;
                self.resend.push(op.id);
                return;
            }
            assert!(
                ev.remote_offset % FC_PAYLOAD as u64 == 0 && ev.remote_offset < FC_BLOCK as u64,
                "{ev:?}"
            );
            want.remote_offset = ev.remote_offset;
            l.fc_ack_offset[op.id as usize] = Some(ev.remote_offset);
        }
        assert_eq!(ev, want, "completion of {op:?}");
        l.completed[op.id as usize] += 1;
        self.in_flight -= 1;
        match op.kind {
            Kind::Get { offset, len, land } => {
                let got = self.land.to_vec(land, len).unwrap();
                let want: Vec<u8> = (offset..offset + len)
                    .map(|i| get_src_byte(op.to, i))
                    .collect();
                assert_eq!(got, want, "data of {op:?}");
            }
            Kind::FetchSum { land, .. } => {
                l.fetched[op.id as usize] = Some(self.read_u64(&self.land, land));
            }
            Kind::Swap { prev, land, .. } => {
                assert_eq!(self.read_u64(&self.land, land), prev, "{op:?}");
            }
            _ => {}
        }
    }

    fn read_u64(&self, r: &Region, at: usize) -> u64 {
        let mut b = [0u8; 8];
        r.read(at, &mut b).unwrap();
        u64::from_le_bytes(b)
    }

    fn on_target(&mut self, ev: Event) {
        let op = self.script.ops[(ev.match_bits & ID_MASK) as usize];
        assert_eq!(op.to, self.idx, "{ev:?}");
        let (kind, user_ptr) = match op.kind {
            Kind::Put { .. } => (EventKind::Put, ME_PUT),
            Kind::Get { .. } => (EventKind::Get, ME_GET),
            Kind::Sum { .. } => (EventKind::Atomic, ME_ATOMIC),
            Kind::FetchSum { .. } | Kind::Swap { .. } => (EventKind::FetchAtomic, ME_ATOMIC),
            Kind::Fc => panic!("flow-controlled put on the RMA portal: {ev:?}"),
        };
        let mut want = base_event(
            kind,
            &op,
            ProcessId::Rank(op.from as u32),
            self.script.put_slots,
        );
        want.user_ptr = user_ptr;
        want.start = want.remote_offset;
        assert_eq!(ev, want, "target event of {op:?}");
        self.ledger.borrow_mut().target_seen[op.id as usize] += 1;
    }

    fn on_flow(&mut self, ev: Event) {
        let mut l = self.ledger.borrow_mut();
        match ev.kind {
            EventKind::Put => {
                let op = self.script.ops[ev.hdr_data as usize];
                assert!(op.to == self.idx && matches!(op.kind, Kind::Fc), "{ev:?}");
                let b = ev.user_ptr as usize;
                assert!(
                    self.block_live.get(b) == Some(&true),
                    "deposit into a dead block {ev:?}"
                );
                let mut want = base_event(
                    EventKind::Put,
                    &op,
                    ProcessId::Rank(op.from as u32),
                    self.script.put_slots,
                );
                want.user_ptr = ev.user_ptr;
                want.start = ev.start;
                want.remote_offset = ev.start;
                assert_eq!(ev, want);
                let got = self.blocks[b]
                    .to_vec(ev.start as usize, FC_PAYLOAD)
                    .unwrap();
                assert_eq!(got, payload(op.id, FC_PAYLOAD), "payload of {op:?}");
                l.target_seen[op.id as usize] += 1;
                l.fc_landing[op.id as usize] = Some((b, ev.start));
            }
            EventKind::AutoUnlink => {
                let b = ev.user_ptr as usize;
                assert!(self.block_live.get(b) == Some(&true), "{ev:?}");
                assert!(matches!(ev.initiator, ProcessId::Rank(r) if (r as usize) < NODES));
                let mut want = ev;
                want.start = 0;
                want.hdr_data = 0;
                want.match_bits = 0;
                want.rlength = 0;
                want.mlength = 0;
                want.remote_offset = 0;
                want.uid = UID;
                want.pt_index = PT_FC;
                want.list = ListKind::Priority;
                want.ni_fail = NiFail::Ok;
                want.atomic_op = None;
                want.atomic_type = None;
                assert_eq!(ev, want);
                self.block_live[b] = false;
                self.live -= 1;
                l.auto_unlinks += 1;
            }
            EventKind::Link => {
                assert_eq!(ev.pt_index, PT_FC);
                assert!(self.block_live.get(ev.user_ptr as usize) == Some(&true));
            }
            EventKind::PtDisabled => {
                let op = self.script.ops[ev.hdr_data as usize];
                assert!(op.to == self.idx && matches!(op.kind, Kind::Fc), "{ev:?}");
                let mut want = base_event(
                    EventKind::PtDisabled,
                    &op,
                    ProcessId::Rank(op.from as u32),
                    self.script.put_slots,
                );
                want.mlength = 0;
                want.ni_fail = NiFail::PtDisabled;
                assert_eq!(ev, want);
                l.pt_disabled_events += 1;
            }
            k => panic!("unexpected {k:?} on the flow-controlled portal: {ev:?}"),
        }
    }

    /// The target's side of flow control: keep a block posted, re-enable a disabled portal.
    pub(crate) fn housekeeping(&mut self) -> bool {
        let mut acted = false;
        while self.live < FC_LIVE {
            let b = self.blocks.len();
            let r = Region::new(FC_BLOCK);
            let mut spec = me(&r, 0, !0, MeOptions::OP_PUT | MeOptions::MANAGE_LOCAL);
            spec.min_free = FC_PAYLOAD as u64;
            self.blocks.push(r);
            self.block_live.push(true);
            self.live += 1;
            self.stack
                .engine
                .me_append(self.ni, PT_FC, spec, ListKind::Priority, b as u64)
                .unwrap();
            acted = true;
        }
        if !self.stack.engine.pt_is_enabled(self.ni, PT_FC).unwrap() {
            self.stack.engine.pt_enable(self.ni, PT_FC).unwrap();
            self.ledger.borrow_mut().enables += 1;
            acted = true;
        }
        acted
    }

    fn outstanding(&self) -> usize {
        let counted = self.stack.engine.ct_get(self.ct).unwrap();
        assert_eq!(counted.failure, 0);
        self.in_flight + (self.ct_issued - counted.success) as usize
    }

    /// Resends refused operations, then issues new ones while the window allows.
    pub(crate) fn issue(&mut self) -> bool {
        let mut acted = false;
        while let Some(id) = self.resend.pop() {
            let op = self.script.ops[id as usize];
            self.ledger.borrow_mut().resends += 1;
            self.start(&op);
            acted = true;
        }
        while self.next_op < OPS_PER_NODE && self.outstanding() < WINDOW {
            let op = self.my_ops()[self.next_op];
            self.next_op += 1;
            match op.kind {
                Kind::Put {
                    ack: AckReq::CtAck, ..
                } => self.ct_issued += 1,
                Kind::Put {
                    ack: AckReq::None, ..
                } => {}
                _ => self.in_flight += 1,
            }
            self.start(&op);
            acted = true;
        }
        acted
    }

    fn start(&mut self, op: &Op) {
        let s = shape(op, self.script.put_slots);
        let remote = RemoteAddr {
            target: ProcessId::Rank(op.to as u32),
            pt_index: s.pt_index,
            match_bits: s.match_bits,
            remote_offset: s.remote_offset,
        };
        // Operations copy their source at issue, so one staging area serves them all.
        let e = &mut self.stack.engine;
        let put = |e: &mut Engine, len: usize, ack: AckReq| {
            self.src.write(0, &payload(op.id, len)).unwrap();
            e.put(&PutArgs {
                md: if ack == AckReq::CtAck {
                    self.md_ct
                } else {
                    self.md_full
                },
                local_offset: 0,
                length: len as u64,
                ack_req: ack,
                remote,
                user_ptr: op.id,
                hdr_data: s.hdr_data,
            })
        };
        let r = match op.kind {
            Kind::Put { len, ack, .. } => put(e, len, ack),
            Kind::Fc => put(e, FC_PAYLOAD, AckReq::Ack),
            Kind::Get { len, land, .. } => e.get(&GetArgs {
                md: self.md_land,
                local_offset: land as u64,
                length: len as u64,
                remote,
                user_ptr: op.id,
            }),
            Kind::Sum { v } => {
                self.src.write(0, &v.to_le_bytes()).unwrap();
                e.atomic(&AtomicArgs {
                    md: self.md_full,
                    local_offset: 0,
                    length: 8,
                    ack_req: AckReq::Ack,
                    remote,
                    user_ptr: op.id,
                    hdr_data: s.hdr_data,
                    op: AtomicOp::Sum,
                    datatype: AtomicType::Uint64,
                })
            }
            Kind::FetchSum { v, land } | Kind::Swap { v, land, .. } => {
                self.src.write(0, &v.to_le_bytes()).unwrap();
                let (aop, dt) = s.atomic.unwrap();
                let args = FetchArgs {
                    get_md: self.md_land,
                    get_offset: land as u64,
                    put_md: self.md_full,
                    put_offset: 0,
                    length: 8,
                    remote,
                    user_ptr: op.id,
                    hdr_data: s.hdr_data,
                    operand: &[],
                    op: aop,
                    datatype: dt,
                };
                if aop == AtomicOp::Swap {
                    e.swap(&args)
                } else {
                    e.fetch_atomic(&args)
                }
            }
        };
        r.unwrap_or_else(|err| panic!("node {} could not start {op:?}: {err}", self.idx));
    }

    /// Every byte this node exposes or received into, against the model.
    pub(crate) fn check_memory(&self, l: &Ledger) {
        let mut put = vec![0u8; self.put_area.len()];
        let mut land = vec![0u8; self.land.len()];
        let (mut sum, mut fetch_total) = (0u64, 0u64);
        let mut swaps = [0u64; NODES];
        for op in &self.script.ops {
            match op.kind {
                Kind::Put { len, .. } if op.to == self.idx => {
                    let at = shape(op, self.script.put_slots).remote_offset as usize;
                    put[at..at + len].copy_from_slice(&payload(op.id, len));
                }
                Kind::Get {
                    offset,
                    len,
                    land: at,
                } if op.from == self.idx => {
                    for i in 0..len {
                        land[at + i] = get_src_byte(op.to, offset + i);
                    }
                }
                Kind::Sum { v } if op.to == self.idx => sum = sum.wrapping_add(v),
                Kind::FetchSum { v, .. } if op.to == self.idx => {
                    fetch_total = fetch_total.wrapping_add(v)
                }
                Kind::Swap { v, .. } if op.to == self.idx => swaps[op.from] = v,
                _ => {}
            }
            match op.kind {
                Kind::FetchSum { land: at, .. } if op.from == self.idx => {
                    let v = l.fetched[op.id as usize].unwrap();
                    land[at..at + 8].copy_from_slice(&v.to_le_bytes());
                }
                Kind::Swap { prev, land: at, .. } if op.from == self.idx => {
                    land[at..at + 8].copy_from_slice(&prev.to_le_bytes());
                }
                _ => {}
            }
        }
        assert!(
            self.put_area.to_vec(0, put.len()).unwrap() == put,
            "put area of node {}",
            self.idx
        );
        assert!(
            self.land.to_vec(0, land.len()).unwrap() == land,
            "landing area of node {}",
            self.idx
        );
        let mut atomics = Vec::with_capacity(ATOMIC_LEN);
        atomics.extend_from_slice(&sum.to_le_bytes());
        atomics.extend_from_slice(&fetch_total.to_le_bytes());
        for v in swaps {
            atomics.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(
            self.atomics.to_vec(0, ATOMIC_LEN).unwrap(),
            atomics,
            "node {}",
            self.idx
        );
        let src: Vec<u8> = (0..GET_SRC).map(|i| get_src_byte(self.idx, i)).collect();
        assert!(
            self.get_src.to_vec(0, GET_SRC).unwrap() == src,
            "gets never write"
        );
        // Flow-controlled blocks: exactly the payloads that landed there, where they landed.
        let mut blocks: Vec<Vec<u8>> = vec![vec![0u8; FC_BLOCK]; self.blocks.len()];
        for op in self
            .script
            .ops
            .iter()
            .filter(|o| o.to == self.idx && matches!(o.kind, Kind::Fc))
        {
            let (b, start) = l.fc_landing[op.id as usize].unwrap();
            let at = start as usize;
            blocks[b][at..at + FC_PAYLOAD].copy_from_slice(&payload(op.id, FC_PAYLOAD));
        }
        for (b, want) in blocks.iter().enumerate() {
            assert_eq!(
                &self.blocks[b].to_vec(0, FC_BLOCK).unwrap(),
                want,
                "block {b}"
            );
        }
    }

    /// The counted acks of `CtAck` puts: all successes, no failure.
    pub(crate) fn check_counters(&self, _l: &Ledger) {
        let v = self.stack.engine.ct_get(self.ct).unwrap();
        let want = self
            .my_ops()
            .iter()
            .filter(|o| {
                matches!(
                    o.kind,
                    Kind::Put {
                        ack: AckReq::CtAck,
                        ..
                    }
                )
            })
            .count() as u64;
        assert_eq!((v.success, v.failure), (want, 0), "node {}", self.idx);
    }
}
