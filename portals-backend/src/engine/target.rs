//! The target side: find the NI and PT, check the operation, match an entry, deposit (or read,
//! or combine), post events and counts, unlink, and answer the initiator.
//!
//! Every refusal is reported to the initiator with its `ni_fail` when it asked for an ack or
//! reply, and counted in the NI's status registers (drops, permission and operation
//! violations); none touches target memory.

use super::atomic::{self, op_allowed, single_element};
use super::events::blank;
use super::objects::{EqHandle, MeHandle, NiHandle, SR_DROP, SR_OP, SR_PERM};
use super::Engine;
use crate::memory::RegionSpan;
use crate::message::OutMessage;
use crate::proto::{self, OpKind, Request, RequestHeader, ResponseHeader, ResponseKind};
use crate::types::{
    AckReq, Addressing, Event, EventKind, ListKind, Matching, MeOptions, NiFail, PhysId, ProcessId,
    PtOptions, Rank, IN_PLACE_MIN, NID_ANY, PID_ANY, RANK_ANY, UID_ANY,
};

/// A refusal: what the initiator is told and which status register counts it.
struct Refusal {
    fail: NiFail,
    /// Index into the NI's status registers (none when there is no NI).
    register: Option<usize>,
}

impl Refusal {
    fn new(fail: NiFail, register: usize) -> Self {
        Refusal {
            fail,
            register: Some(register),
        }
    }
}

/// The entry an operation matched and what it will do there.
struct Matched {
    ni: NiHandle,
    entry: MeHandle,
    list: ListKind,
    eq: Option<EqHandle>,
    initiator: ProcessId,
    /// Offset in the entry.
    offset: u64,
    mlength: u64,
    comm_event: bool,
    unlink: bool,
    unlink_event: bool,
    /// The PT lets a successful ACK wait ([`PtOptions::LAZY_ACK`]).
    lazy_ack: bool,
}

/// Whether an entry's `match_id` admits the initiator (`from`, and its rank on a logical NI).
pub(super) fn id_matches(id: ProcessId, from: PhysId, rank: Option<Rank>) -> bool {
    match id {
        ProcessId::Phys(p) => {
            (p.nid == NID_ANY || p.nid == from.nid) && (p.pid == PID_ANY || p.pid == from.pid)
        }
        ProcessId::Rank(r) => r == RANK_ANY || Some(r) == rank,
    }
}

/// Whether an entry's options allow the operation.
pub(super) fn permits(options: MeOptions, op: OpKind) -> bool {
    match op {
        OpKind::Put | OpKind::Atomic => options.contains(MeOptions::OP_PUT),
        OpKind::Get => options.contains(MeOptions::OP_GET),
        OpKind::FetchAtomic | OpKind::Swap => {
            options.contains(MeOptions::OP_PUT | MeOptions::OP_GET)
        }
    }
}

/// The event of an operation arriving in an entry, on either list: an entry of the overflow
/// list reports it as an arrival too (with `list` = overflow); the `*_OVERFLOW` kinds are for
/// a later entry that matches the header it left on the unexpected list
/// ([`super::unexpected`]).
fn comm_kind(op: OpKind) -> EventKind {
    match op {
        OpKind::Put => EventKind::Put,
        OpKind::Get => EventKind::Get,
        OpKind::Atomic => EventKind::Atomic,
        OpKind::FetchAtomic | OpKind::Swap => EventKind::FetchAtomic,
    }
}

impl Engine {
    pub(super) fn handle_request(&mut self, from: PhysId, req: &Request<'_>) {
        let h = &req.header;
        match self.match_request(from, h) {
            Ok(m) => self.execute(from, req, m),
            Err((ni, refusal)) => {
                if let (Some(ni), Some(reg)) = (ni, refusal.register) {
                    if let Ok(n) = self.ni_mut("request", ni) {
                        n.status[reg] += 1;
                    }
                }
                self.respond(from, h, refusal.fail, 0, 0);
            }
        }
    }

    /// Sends a data-less ack or reply (or nothing when none was asked for). The ACK of an
    /// [`AckReq::Confirmed`] put is fenced: the initiator takes no later transport
    /// acknowledgement for the put's success before this ACK has reached it.
    fn respond(&mut self, to: PhysId, h: &RequestHeader, fail: NiFail, mlength: u64, offset: u64) {
        if let Some(bytes) = self.response_bytes(h, fail, mlength, offset) {
            let message = OutMessage::from(bytes);
            let message = if matches!(h.ack_req, AckReq::Confirmed | AckReq::ConfirmedAck) {
                message.fenced()
            } else {
                message
            };
            self.outgoing.push_back((to, message));
        }
    }

    /// The encoded data-less ack or reply to `h` (`None` when none was asked for).
    fn response_bytes(
        &mut self,
        h: &RequestHeader,
        fail: NiFail,
        mlength: u64,
        offset: u64,
    ) -> Option<Vec<u8>> {
        let kind = if h.op.has_reply() {
            ResponseKind::Reply
        } else if h.ack_req != AckReq::None {
            ResponseKind::Ack
        } else {
            return None;
        };
        let rh = ResponseHeader {
            kind,
            ni_fail: fail,
            op_id: h.op_id,
            mlength: if kind == ResponseKind::Reply {
                0
            } else {
                mlength
            },
            offset,
        };
        // A data-less response always encodes.
        proto::encode_response_with_into(self.message_buffer(), &rh, |_| Ok(())).ok()
    }

    /// Everything up to and including the choice of entry; no state changes except refusal
    /// bookkeeping done by the caller and flow-control disabling done here.
    fn match_request(
        &mut self,
        from: PhysId,
        h: &RequestHeader,
    ) -> Result<Matched, (Option<NiHandle>, Refusal)> {
        let Some(ni) = self.by_kind[h.ni_kind.index() as usize] else {
            self.stats.no_ni += 1;
            return Err((
                None,
                Refusal {
                    fail: NiFail::Dropped,
                    register: None,
                },
            ));
        };
        let refuse = |fail, reg| Err((Some(ni), Refusal::new(fail, reg)));
        let Ok(state) = self.nis.get("request", ni) else {
            return refuse(NiFail::Dropped, SR_DROP);
        };
        // Who is asking: a rank (checked against the map when there is one) or a phys id.
        let rank = match state.kind.addressing {
            Addressing::Physical => None,
            Addressing::Logical => {
                let r = h.initiator_rank;
                if let Some(map) = &state.map {
                    if map.get(r as usize) != Some(&from) {
                        self.stats.bad_initiator += 1;
                        return refuse(NiFail::Dropped, SR_DROP);
                    }
                }
                Some(r)
            }
        };
        let initiator = rank.map_or(ProcessId::Phys(from), ProcessId::Rank);
        let limits = state.limits;
        let matching = state.kind.matching == Matching::Matching;
        let Some(pt) = state.pts.get(h.pt_index as usize).and_then(Option::as_ref) else {
            return refuse(NiFail::Dropped, SR_DROP);
        };
        if !pt.enabled {
            return refuse(NiFail::PtDisabled, SR_DROP);
        }
        if h.rlength > limits.max_msg_size {
            return refuse(NiFail::OpViolation, SR_OP);
        }
        if let Some((op, dt)) = h.atomic {
            let size = dt.size() as u64;
            let max = if h.op == OpKind::Atomic {
                limits.max_atomic_size
            } else {
                limits.max_fetch_atomic_size
            };
            if !op_allowed(h.op, op, dt)
                || h.rlength % size != 0
                || h.rlength > max
                || (single_element(op) && h.rlength != size)
            {
                return refuse(NiFail::OpViolation, SR_OP);
            }
        }

        // Priority list, then overflow; the first entry that matches and permits wins.
        let mut refused_perm = false;
        let mut found = None;
        'search: for list in [ListKind::Priority, ListKind::Overflow] {
            for &eh in pt.list(list) {
                let Ok(e) = self.entries.get("request", eh) else {
                    continue;
                };
                if matching
                    && (!id_matches(e.match_id, from, rank)
                        || (h.match_bits ^ e.match_bits) & !e.ignore_bits != 0)
                {
                    continue;
                }
                if !permits(e.options, h.op) || (e.uid != UID_ANY && e.uid != h.uid) {
                    refused_perm = true;
                    continue;
                }
                let offset = if e.options.contains(MeOptions::MANAGE_LOCAL) {
                    e.local_offset
                } else {
                    h.remote_offset
                };
                let fits = offset <= e.length && h.rlength <= e.length - offset;
                if !fits && e.options.contains(MeOptions::NO_TRUNCATE) {
                    continue;
                }
                let data_op = h.op == OpKind::Put || h.op == OpKind::Get;
                if offset > e.length && data_op && pt.options.contains(PtOptions::PAST_END_EMPTY) {
                    found = Some((eh, list, e.length, 0));
                    break 'search;
                }
                // Starting past the end, or an atomic that does not fit whole (atomics are
                // never truncated): refused, target memory untouched.
                if offset > e.length || (!fits && !data_op) {
                    return refuse(NiFail::Segv, SR_OP);
                }
                found = Some((eh, list, offset, h.rlength.min(e.length - offset)));
                break 'search;
            }
        }
        let eq = pt.eq;
        let unexpected_len = pt.unexpected.len();
        let flowctrl = pt.options.contains(PtOptions::FLOWCTRL);
        let lazy_ack = pt.options.contains(PtOptions::LAZY_ACK);
        let Some((entry, list, offset, mlength)) = found else {
            if refused_perm {
                return refuse(NiFail::PermViolation, SR_PERM);
            }
            if flowctrl {
                self.flow_disable(ni, h, initiator, eq, true);
                return refuse(NiFail::PtDisabled, SR_DROP);
            }
            return refuse(NiFail::NoMatch, SR_DROP);
        };
        let Ok(e) = self.entries.get("request", entry) else {
            return refuse(NiFail::Dropped, SR_DROP);
        };
        let o = e.options;
        // An arrival in the overflow list needs room for its header on the unexpected list:
        // without it, flow control disables the PT as for any lack of receive resources.
        if list == ListKind::Overflow
            && !o.contains(MeOptions::UNEXPECTED_HDR_DISABLE)
            && unexpected_len >= limits.max_unexpected_headers as usize
        {
            if flowctrl {
                let notify = !o.contains(MeOptions::EVENT_FLOWCTRL_DISABLE);
                self.flow_disable(ni, h, initiator, eq, notify);
                return refuse(NiFail::PtDisabled, SR_DROP);
            }
            return refuse(NiFail::Dropped, SR_DROP);
        }
        let comm_event =
            !o.intersects(MeOptions::EVENT_COMM_DISABLE | MeOptions::EVENT_SUCCESS_DISABLE);
        let unlink = o.contains(MeOptions::USE_ONCE)
            || (o.contains(MeOptions::MANAGE_LOCAL) && e.length - (offset + mlength) < e.min_free);
        let unlink_event = unlink && !o.contains(MeOptions::EVENT_UNLINK_DISABLE);
        // Flow control keeps a slot free for the PT_DISABLED of every enabled flow-controlled
        // PT of the EQ (this one among them): refuse (and disable) rather than post events
        // the EQ cannot hold, or leave another PT of the same EQ no room for its own.
        if let (Some(q), true) = (eq, flowctrl) {
            let need = usize::from(comm_event) + usize::from(unlink_event);
            let (free, reserve) = self
                .eqs
                .get("request", q)
                .map_or((0, 1), |q| (q.free_slots(), q.flow_reserve.max(1) as usize));
            if need > 0 && free < need + reserve {
                let notify = !o.contains(MeOptions::EVENT_FLOWCTRL_DISABLE);
                self.flow_disable(ni, h, initiator, eq, notify);
                return refuse(NiFail::PtDisabled, SR_DROP);
            }
        }
        Ok(Matched {
            ni,
            entry,
            list,
            eq,
            initiator,
            offset,
            mlength,
            comm_event,
            unlink,
            unlink_event,
            lazy_ack,
        })
    }

    /// Disables a flow-controlled PT and posts PT_DISABLED (the engine has no in-flight target
    /// work, so "once in-flight operations drain" is now).
    fn flow_disable(
        &mut self,
        ni: NiHandle,
        h: &RequestHeader,
        initiator: ProcessId,
        eq: Option<EqHandle>,
        notify: bool,
    ) {
        // The PT may be gone or disabled already only through a bug elsewhere: then there is
        // nothing to disable, and the event still tells the owner why it was refused.
        let _ = self.pt_set_enabled("flowctrl", ni, h.pt_index, false);
        if let (Some(eq), true) = (eq, notify) {
            let mut ev = blank(EventKind::PtDisabled);
            ev.hdr_data = h.hdr_data;
            ev.match_bits = h.match_bits;
            ev.rlength = h.rlength;
            ev.remote_offset = h.remote_offset;
            ev.initiator = initiator;
            ev.uid = h.uid;
            ev.pt_index = h.pt_index;
            ev.ni_fail = NiFail::PtDisabled;
            self.post(eq, ev);
        }
    }

    /// Performs a matched operation: memory, events, counts, unlink, response.
    fn execute(&mut self, from: PhysId, req: &Request<'_>, m: Matched) {
        let h = &req.header;
        // The reply's buffer, taken before the entry is borrowed (a put needs none).
        let reply_buf = if h.op.has_reply() {
            self.message_buffer()
        } else {
            Vec::new()
        };
        let Ok(e) = self.entries.get_mut("request", m.entry) else {
            return;
        };
        let at = (e.offset + m.offset) as usize;
        let len = m.mlength as usize;
        let (user_ptr, ct, options) = (e.user_ptr, e.ct, e.options);
        if options.contains(MeOptions::MANAGE_LOCAL) {
            e.local_offset = m.offset + m.mlength;
        }
        // What the event reports: the region's origin (0, or the C address of its memory)
        // plus the offset.
        let start = e.region.origin().wrapping_add(e.offset + m.offset);
        // Borrowed, not cloned: an `Arc` clone and drop per message were two locked
        // instructions on the target's path.
        let region = &e.region;

        // Memory first; the response of a get/fetch/swap is filled straight from the region.
        let mut response = None;
        let done = match (h.op, h.atomic) {
            (OpKind::Put, _) => region.write(at, &req.data[..len]).map_err(|_| ()),
            (OpKind::Atomic, Some((op, dt))) => {
                atomic::apply(op, dt, region, at, &req.data[..len], &[], None).map_err(|_| ())
            }
            (OpKind::Get | OpKind::FetchAtomic | OpKind::Swap, _) => {
                let rh = ResponseHeader {
                    kind: ResponseKind::Reply,
                    ni_fail: NiFail::Ok,
                    op_id: h.op_id,
                    mlength: m.mlength,
                    offset: m.offset,
                };
                let filled = match h.atomic {
                    Some((op, dt)) if h.op != OpKind::Get => {
                        proto::encode_response_with_into(reply_buf, &rh, |buf| {
                            atomic::apply(
                                op,
                                dt,
                                region,
                                at,
                                &req.data[..len],
                                req.operand,
                                Some(buf),
                            )
                        })
                        .map(OutMessage::from)
                    }
                    // A large get from an IN_PLACE_REPLY entry is answered from the region.
                    _ if options.contains(MeOptions::IN_PLACE_REPLY)
                        && m.mlength >= IN_PLACE_MIN =>
                    {
                        match RegionSpan::new(region.clone(), at, len) {
                            Ok(span) => proto::encode_response_head_into(reply_buf, &rh)
                                .map(|head| OutMessage::new(head, Some(span))),
                            // Unreachable: bounds were checked against the entry.
                            Err(e) => Err(e.into()),
                        }
                    }
                    // A get's data is appended straight from the region (no zeroing first).
                    _ => proto::encode_response_appending_into(reply_buf, &rh, |buf| {
                        region.append_to(at, m.mlength as usize, buf)
                    })
                    .map(OutMessage::from),
                };
                filled.map(|b| response = Some(b)).map_err(|_| ())
            }
            // Decoding guarantees atomics carry their op; nothing else reaches here.
            (OpKind::Atomic, None) => Err(()),
        };
        if done.is_err() {
            // Unreachable: bounds were checked against the entry, which lies in its region.
            if let Ok(n) = self.ni_mut("request", m.ni) {
                n.status[SR_OP] += 1;
            }
            self.respond(from, h, NiFail::Segv, 0, 0);
            return;
        }

        if let (Some(eq), true) = (m.eq, m.comm_event) {
            let ev = Event {
                kind: comm_kind(h.op),
                start,
                user_ptr,
                hdr_data: h.hdr_data,
                match_bits: h.match_bits,
                rlength: h.rlength,
                mlength: m.mlength,
                remote_offset: m.offset,
                initiator: m.initiator,
                uid: h.uid,
                pt_index: h.pt_index,
                list: m.list,
                ni_fail: NiFail::Ok,
                atomic_op: h.atomic.map(|a| a.0),
                atomic_type: h.atomic.map(|a| a.1),
            };
            self.post(eq, ev);
        }
        if m.list == ListKind::Overflow && !options.contains(MeOptions::UNEXPECTED_HDR_DISABLE) {
            self.record_unexpected(m.ni, h, m.initiator, from, start, m.mlength, m.offset);
        }
        if let (Some(ct), true) = (ct, options.contains(MeOptions::EVENT_CT_COMM)) {
            let bytes = options
                .contains(MeOptions::EVENT_CT_BYTES)
                .then_some(m.mlength);
            self.count(ct, true, bytes);
        }
        if m.unlink && self.unlink("auto_unlink", m.entry).is_ok() && m.unlink_event {
            if let Some(eq) = m.eq {
                let mut ev = blank(EventKind::AutoUnlink);
                ev.user_ptr = user_ptr;
                ev.pt_index = h.pt_index;
                ev.list = m.list;
                ev.uid = h.uid;
                ev.initiator = m.initiator;
                self.post(eq, ev);
            }
        }
        match response {
            Some(message) => self.outgoing.push_back((from, message)),
            // The initiator learns of this success from its transport (see
            // `AckReq::Confirmed`); only a truncation needs saying, and for a `ConfirmedAck`
            // also a deposit elsewhere than asked (a locally managed entry).
            None if h.ack_req == AckReq::Confirmed && m.mlength == h.rlength => {}
            None if h.ack_req == AckReq::ConfirmedAck
                && m.mlength == h.rlength
                && m.offset == h.remote_offset =>
            {
                self.silent_confirmations.push(from);
            }
            None if m.lazy_ack
                && !matches!(
                    h.ack_req,
                    AckReq::None | AckReq::Confirmed | AckReq::ConfirmedAck
                )
                && !h.op.has_reply() =>
            {
                if let Some(bytes) = self.response_bytes(h, NiFail::Ok, m.mlength, m.offset) {
                    self.lazy_outgoing.push_back((from, bytes));
                }
            }
            None => self.respond(from, h, NiFail::Ok, m.mlength, m.offset),
        }
    }
}
