//! The initiator side: put, get, atomic, fetch-atomic and swap; completing operations when
//! their ack or reply arrives; failing them when their peer fails.

use super::events::blank;
use super::objects::{AtomicArgs, FetchArgs, GetArgs, MdHandle, NiHandle, PutArgs, RemoteAddr};
use super::Engine;
use crate::error::{PtlError, PtlResult};
use crate::memory::RegionSpan;
use crate::message::OutMessage;
use crate::proto::{self, is_swap_op, OpKind, RequestHeader, Response, ResponseKind};
use crate::types::{
    AckReq, Addressing, AtomicOp, AtomicType, Event, EventKind, MdOptions, NiFail, PhysId,
    ProcessId, PtIndex, IN_PLACE_MIN, NID_ANY, PID_ANY, RANK_ANY,
};

/// An operation waiting for its ack or reply.
pub(crate) struct PendingOp {
    pub(crate) ni: NiHandle,
    pub(crate) kind: OpKind,
    /// Interface the request went to (the only one allowed to answer).
    pub(crate) peer: PhysId,
    /// The target as the application named it (reported in events).
    pub(crate) target: ProcessId,
    /// The MD the response reports on (and, for replies, lands in).
    pub(crate) md: MdHandle,
    pub(crate) local_offset: u64,
    pub(crate) length: u64,
    pub(crate) ack_req: AckReq,
    pub(crate) user_ptr: u64,
    pub(crate) match_bits: u64,
    /// The offset the initiator asked for (what a confirmed success reports).
    pub(crate) remote_offset: u64,
    pub(crate) pt_index: PtIndex,
    pub(crate) hdr_data: u64,
    pub(crate) atomic: Option<(AtomicOp, AtomicType)>,
}

/// Everything `start` needs to issue one operation.
struct Issue<'a> {
    call: &'static str,
    kind: OpKind,
    remote: RemoteAddr,
    ack_req: AckReq,
    atomic: Option<(AtomicOp, AtomicType)>,
    length: u64,
    user_ptr: u64,
    hdr_data: u64,
    operand: &'a [u8],
    /// MD and offset the data is copied from (not for a get).
    source: Option<(MdHandle, u64)>,
    /// Bytes sent instead of the source MD's (which still reports the SEND): see
    /// [`Engine::put_from`].
    data: Option<&'a [u8]>,
    /// MD and offset the response reports on (none for an unacknowledged put/atomic).
    completion: Option<(MdHandle, u64)>,
}

impl Engine {
    /// `PtlPut`: copies `length` bytes out of the MD now (the SEND event means the MD may be
    /// reused) and sends them to the target.
    pub fn put(&mut self, a: &PutArgs) -> PtlResult<()> {
        self.start_put("put", a, None)
    }

    /// [`Engine::put`] of `data` instead of the MD's bytes (`a.length` must equal its
    /// length): the MD and offset still say where the SEND event and counts go and bound the
    /// length. Saves a caller whose data is not in registered memory the copy into a bounce
    /// MD; the data is copied into the message before this returns, as with `put`.
    pub fn put_from(&mut self, a: &PutArgs, data: &[u8]) -> PtlResult<()> {
        if data.len() as u64 != a.length {
            return Err(PtlError::arg(
                "put_from",
                format!("{} bytes given for a put of {}", data.len(), a.length),
            ));
        }
        self.start_put("put_from", a, Some(data))
    }

    /// The region and first byte that a put of `a` takes its bytes from, and whether it
    /// sends them from there in place ([`MdOptions::IN_PLACE`]) rather than from a copy that
    /// [`Engine::put`] makes. Checks the MD range as `put` does.
    pub fn put_source(&self, a: &PutArgs) -> PtlResult<(crate::memory::Region, usize, bool)> {
        self.check_md_range("put", a.md, a.local_offset, a.length)?;
        let m = self.mds.get("put", a.md)?;
        let in_place = sends_in_place(m.options, OpKind::Put, a.length, a.ack_req);
        Ok((
            m.region.clone(),
            (m.offset + a.local_offset) as usize,
            in_place,
        ))
    }

    /// The message queued last, with its destination, until the driver takes it
    /// ([`Engine::poll_outgoing`]).
    pub fn last_outgoing(&self) -> Option<(PhysId, &OutMessage)> {
        self.outgoing.back().map(|(peer, m)| (*peer, m))
    }

    fn start_put(&mut self, call: &'static str, a: &PutArgs, data: Option<&[u8]>) -> PtlResult<()> {
        self.start(Issue {
            call,
            kind: OpKind::Put,
            remote: a.remote,
            ack_req: a.ack_req,
            atomic: None,
            length: a.length,
            user_ptr: a.user_ptr,
            hdr_data: a.hdr_data,
            operand: &[],
            source: Some((a.md, a.local_offset)),
            data,
            completion: (a.ack_req != AckReq::None).then_some((a.md, a.local_offset)),
        })
    }

    /// `PtlGet`: fetches `length` bytes from the target into the MD; completes with REPLY.
    pub fn get(&mut self, a: &GetArgs) -> PtlResult<()> {
        self.start(Issue {
            call: "get",
            kind: OpKind::Get,
            remote: a.remote,
            ack_req: AckReq::None,
            atomic: None,
            length: a.length,
            user_ptr: a.user_ptr,
            hdr_data: 0,
            operand: &[],
            source: None,
            data: None,
            completion: Some((a.md, a.local_offset)),
        })
    }

    /// `PtlAtomic`: combines the MD's data with the target's. The datatype/operation pairing is
    /// checked by the target (`NI_OP_VIOLATION`); sizes and the operation family here.
    pub fn atomic(&mut self, a: &AtomicArgs) -> PtlResult<()> {
        const CALL: &str = "atomic";
        if is_swap_op(a.op) {
            return Err(PtlError::arg(
                CALL,
                format!("{:?} is only valid in swap", a.op),
            ));
        }
        let ni = self.mds.get(CALL, a.md)?.ni;
        self.check_atomic_len(CALL, ni, a.length, a.datatype, false)?;
        self.start(Issue {
            call: CALL,
            kind: OpKind::Atomic,
            remote: a.remote,
            ack_req: a.ack_req,
            atomic: Some((a.op, a.datatype)),
            length: a.length,
            user_ptr: a.user_ptr,
            hdr_data: a.hdr_data,
            operand: &[],
            source: Some((a.md, a.local_offset)),
            data: None,
            completion: (a.ack_req != AckReq::None).then_some((a.md, a.local_offset)),
        })
    }

    /// `PtlFetchAtomic`: like [`Engine::atomic`], and the target's previous values land in
    /// `get_md` (REPLY event).
    pub fn fetch_atomic(&mut self, a: &FetchArgs<'_>) -> PtlResult<()> {
        const CALL: &str = "fetch_atomic";
        if is_swap_op(a.op) {
            return Err(PtlError::arg(
                CALL,
                format!("{:?} is only valid in swap", a.op),
            ));
        }
        self.fetch_like(CALL, OpKind::FetchAtomic, a, &[])
    }

    /// `PtlSwap`: SWAP on any number of elements; CSWAP* (compare with `operand`) and MSWAP
    /// (mask `operand`) on exactly one. The previous values land in `get_md`.
    pub fn swap(&mut self, a: &FetchArgs<'_>) -> PtlResult<()> {
        const CALL: &str = "swap";
        if !is_swap_op(a.op) {
            return Err(PtlError::arg(
                CALL,
                format!("{:?} is not a swap operation", a.op),
            ));
        }
        let size = a.datatype.size();
        let zeros = [0u8; proto::MAX_OPERAND];
        let operand = if a.op == AtomicOp::Swap {
            // The wire always carries one element; plain SWAP does not use it.
            &zeros[..size]
        } else {
            if a.length != size as u64 {
                return Err(PtlError::arg(
                    CALL,
                    format!(
                        "{:?} works on one {size}-byte element, not {} bytes",
                        a.op, a.length
                    ),
                ));
            }
            if a.operand.len() != size {
                return Err(PtlError::arg(
                    CALL,
                    format!("operand of {} bytes, expected {size}", a.operand.len()),
                ));
            }
            a.operand
        };
        self.fetch_like(CALL, OpKind::Swap, a, operand)
    }

    fn fetch_like(
        &mut self,
        call: &'static str,
        kind: OpKind,
        a: &FetchArgs<'_>,
        operand: &[u8],
    ) -> PtlResult<()> {
        let ni = self.mds.get(call, a.put_md)?.ni;
        if self.mds.get(call, a.get_md)?.ni != ni {
            return Err(PtlError::arg(
                call,
                "get_md and put_md belong to different NIs",
            ));
        }
        self.check_atomic_len(call, ni, a.length, a.datatype, true)?;
        self.start(Issue {
            call,
            kind,
            remote: a.remote,
            ack_req: AckReq::None,
            atomic: Some((a.op, a.datatype)),
            length: a.length,
            user_ptr: a.user_ptr,
            hdr_data: a.hdr_data,
            operand,
            source: Some((a.put_md, a.put_offset)),
            data: None,
            completion: Some((a.get_md, a.get_offset)),
        })
    }

    fn check_atomic_len(
        &self,
        call: &'static str,
        ni: NiHandle,
        length: u64,
        dt: AtomicType,
        fetch: bool,
    ) -> PtlResult<()> {
        let limits = self.ni(call, ni)?.limits;
        let max = if fetch {
            limits.max_fetch_atomic_size
        } else {
            limits.max_atomic_size
        };
        if length % dt.size() as u64 != 0 || length > max {
            return Err(PtlError::arg(
                call,
                format!(
                    "length {length} must be a multiple of {} bytes ({dt:?}) and at most {max}",
                    dt.size()
                ),
            ));
        }
        Ok(())
    }

    fn check_md_range(
        &self,
        call: &'static str,
        md: MdHandle,
        off: u64,
        len: u64,
    ) -> PtlResult<NiHandle> {
        let m = self.mds.get(call, md)?;
        match off.checked_add(len) {
            Some(end) if end <= m.length => Ok(m.ni),
            _ => Err(PtlError::arg(
                call,
                format!(
                    "{len} bytes at offset {off} exceed the MD's {} bytes",
                    m.length
                ),
            )),
        }
    }

    /// Resolves the target to an interface and this process's rank (logical NIs).
    pub(super) fn resolve(
        &self,
        call: &'static str,
        ni: NiHandle,
        target: ProcessId,
    ) -> PtlResult<(PhysId, u32)> {
        let state = self.ni(call, ni)?;
        match (state.kind.addressing, target) {
            (Addressing::Physical, ProcessId::Phys(p)) if p.nid != NID_ANY && p.pid != PID_ANY => {
                Ok((p, RANK_ANY))
            }
            (Addressing::Logical, ProcessId::Rank(r)) => {
                let map = state
                    .map
                    .as_ref()
                    .ok_or_else(|| PtlError::arg(call, "no rank map has been set"))?;
                let peer = *map.get(r as usize).ok_or_else(|| {
                    PtlError::arg(
                        call,
                        format!("rank {r} is outside the map of {} ranks", map.len()),
                    )
                })?;
                let me = state.my_rank.ok_or_else(|| PtlError::Fail {
                    call,
                    reason: format!("this interface ({}) is not in the rank map", self.local),
                })?;
                Ok((peer, me))
            }
            (_, t) => Err(PtlError::arg(
                call,
                format!("target {t:?} is not a concrete process of this NI's addressing mode"),
            )),
        }
    }

    fn start(&mut self, o: Issue<'_>) -> PtlResult<()> {
        let call = o.call;
        // Validate every MD range first: nothing is sent or counted on a refused call.
        let mut ni = None;
        // A put's completion is usually its source range: checked once.
        let completion = o.completion.filter(|c| Some(*c) != o.source);
        for (md, off) in o.source.iter().chain(completion.iter()) {
            let n = self.check_md_range(call, *md, *off, o.length)?;
            if ni.is_some_and(|x| x != n) {
                return Err(PtlError::arg(call, "the MDs belong to different NIs"));
            }
            ni = Some(n);
        }
        let ni = ni.ok_or_else(|| PtlError::arg(call, "no MD"))?;
        let state = self.ni(call, ni)?;
        let (kind, max) = (state.kind, state.limits.max_msg_size);
        if o.length > max {
            return Err(PtlError::arg(
                call,
                format!("length {} exceeds max_msg_size {max}", o.length),
            ));
        }
        let (peer, my_rank) = self.resolve(call, ni, o.remote.target)?;
        let op_id = self.next_op_id;
        // The transport confirms a message to another interface; one to this interface itself
        // passes no transport and asks for the acknowledgement it stands for.
        let confirmed = wire_is_confirmed(o.ack_req, peer == self.local);
        let wire_ack = match o.ack_req {
            AckReq::Confirmed | AckReq::ConfirmedAck if !confirmed => AckReq::Ack,
            AckReq::ConfirmedCtAck if !confirmed => AckReq::CtAck,
            AckReq::ConfirmedCtAck => AckReq::ConfirmedAck,
            other => other,
        };
        let header = RequestHeader {
            op: o.kind,
            ni_kind: kind,
            ack_req: wire_ack,
            atomic: o.atomic,
            pt_index: o.remote.pt_index,
            uid: self.uid,
            initiator_rank: my_rank,
            match_bits: o.remote.match_bits,
            remote_offset: o.remote.remote_offset,
            hdr_data: o.hdr_data,
            op_id,
            rlength: o.length,
        };
        let buf = self.message_buffer();
        let mut bytes = match (o.source, o.data) {
            (Some(_), Some(data)) => {
                proto::encode_request_appending_into(buf, &header, o.operand, o.length, |buf| {
                    buf.extend_from_slice(data);
                    Ok(())
                })
                .map(OutMessage::from)
            }
            (Some((md, off)), None) => {
                let m = self.mds.get(call, md)?;
                let at = (m.offset + off) as usize;
                if sends_in_place(m.options, o.kind, o.length, o.ack_req) {
                    // Sent from the region itself; the MD's owner keeps the bytes until ACK.
                    let span = RegionSpan::new(m.region.clone(), at, o.length as usize)
                        .map_err(|e| PtlError::arg(call, e.to_string()))?;
                    proto::encode_request_head_into(buf, &header, o.operand, o.length)
                        .map(|head| OutMessage::new(head, Some(span)))
                } else {
                    proto::encode_request_appending_into(buf, &header, o.operand, o.length, |buf| {
                        m.region.append_to(at, o.length as usize, buf)
                    })
                    .map(OutMessage::from)
                }
            }
            (None, _) => {
                proto::encode_request_appending_into(buf, &header, o.operand, 0, |_| Ok(()))
                    .map(OutMessage::from)
            }
        }
        .map_err(|e| PtlError::arg(call, e.to_string()))?;
        if confirmed {
            bytes.confirm_as(op_id);
            if wire_ack == AckReq::ConfirmedAck {
                // Its initiator waits on the confirmation (an ACK event or count), not only
                // the resources it frees.
                bytes.mark_awaited();
            }
        }
        self.next_op_id += 1;
        self.outgoing.push_back((peer, bytes));

        if let Some((md, off)) = o.source {
            let uid = self.uid;
            self.report_send(md, off, o.length, || {
                let mut ev = blank(EventKind::Send);
                ev.user_ptr = o.user_ptr;
                ev.hdr_data = o.hdr_data;
                ev.match_bits = o.remote.match_bits;
                ev.rlength = o.length;
                ev.mlength = o.length;
                ev.remote_offset = o.remote.remote_offset;
                ev.initiator = o.remote.target;
                ev.uid = uid;
                ev.pt_index = o.remote.pt_index;
                ev.atomic_op = o.atomic.map(|a| a.0);
                ev.atomic_type = o.atomic.map(|a| a.1);
                ev
            })?;
        }
        if let Some((md, local_offset)) = o.completion {
            self.mds.get_mut(call, md)?.pending += 1;
            self.pending.insert(
                op_id,
                PendingOp {
                    ni,
                    kind: o.kind,
                    peer,
                    target: o.remote.target,
                    md,
                    local_offset,
                    length: o.length,
                    ack_req: o.ack_req,
                    user_ptr: o.user_ptr,
                    match_bits: o.remote.match_bits,
                    remote_offset: o.remote.remote_offset,
                    pt_index: o.remote.pt_index,
                    hdr_data: o.hdr_data,
                    atomic: o.atomic,
                },
            );
        }
        Ok(())
    }

    /// The `length` bytes at `off` have left the MD: SEND event (built by `event`, only when
    /// the MD reports one) and count, per the MD's options.
    fn report_send(
        &mut self,
        md: MdHandle,
        off: u64,
        length: u64,
        event: impl FnOnce() -> Event,
    ) -> PtlResult<()> {
        let m = self.mds.get("send", md)?;
        let start = m.offset + off;
        let origin = m.region.origin();
        let (eq, ct, opts) = (m.eq, m.ct, m.options);
        let eq = eq.filter(|_| {
            !opts.intersects(MdOptions::EVENT_SEND_DISABLE | MdOptions::EVENT_SUCCESS_DISABLE)
        });
        if let Some(eq) = eq {
            let mut ev = event();
            ev.start = origin.wrapping_add(start);
            self.post(eq, ev);
        }
        if let (Some(ct), true) = (ct, opts.contains(MdOptions::EVENT_CT_SEND)) {
            let bytes = opts.contains(MdOptions::EVENT_CT_BYTES).then_some(length);
            self.count(ct, true, bytes);
        }
        Ok(())
    }

    pub(super) fn handle_response(&mut self, from: PhysId, resp: &Response<'_>) {
        let h = resp.header;
        let Some(op) = self.pending.get(&h.op_id) else {
            self.stats.unexpected_responses += 1;
            return;
        };
        if op.peer != from {
            // Not the interface the request went to: a stray or forged message.
            self.stats.unexpected_responses += 1;
            return;
        }
        let expected = if op.kind.has_reply() {
            ResponseKind::Reply
        } else {
            ResponseKind::Ack
        };
        let consistent = h.kind == expected
            && h.mlength <= op.length
            && (h.ni_fail == NiFail::Ok || resp.data.is_empty());
        let Some(op) = self.pending.remove(&h.op_id) else {
            return;
        };
        if consistent {
            if h.ni_fail == NiFail::PtDisabled {
                self.refusals.push(from);
            }
            self.complete(op, h.ni_fail, h.mlength, h.offset, resp.data);
        } else {
            // The peer answered with something this operation cannot use; fail it rather than
            // leave it pending forever.
            self.stats.unexpected_responses += 1;
            self.complete(op, NiFail::Dropped, 0, 0, &[]);
        }
    }

    /// The transport confirmed the message of operation `op_id` to `peer`
    /// ([`crate::transport::TransportEvent::Confirmed`]): an [`AckReq::Confirmed`] operation
    /// that is still pending succeeded. One the target refused, failed or truncated was
    /// completed by the target's ACK, which arrived before the confirmation. A token of an
    /// immediate message ([`Engine::send_immediate`]) counts that message confirmed.
    pub fn handle_confirmed(&mut self, peer: PhysId, op_id: u64) {
        if op_id & super::immediate::IMMEDIATE_TOKEN != 0 {
            self.immediate_confirmed(peer);
            return;
        }
        let Some(op) = self.pending.get(&op_id) else {
            return;
        };
        if op.peer != peer || !wire_is_confirmed(op.ack_req, false) || op.kind.has_reply() {
            self.stats.unexpected_responses += 1;
            return;
        }
        let Some(op) = self.pending.remove(&op_id) else {
            return;
        };
        self.stats.confirmed += 1;
        let (length, offset) = (op.length, op.remote_offset);
        self.complete(op, NiFail::Ok, length, offset, &[]);
    }

    /// Fails every operation waiting on `peer` with `NI_UNDELIVERABLE`, in issue order, and
    /// drops queued messages to it.
    pub fn handle_peer_failed(&mut self, peer: PhysId) {
        self.immediates_failed(peer);
        self.outgoing.retain(|(p, _)| *p != peer);
        self.lazy_outgoing.retain(|(p, _)| *p != peer);
        // A scan of the pending operations: a peer fails rarely, and an index by peer would
        // cost every operation two hash-set updates.
        let mut ids: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, op)| op.peer == peer)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        for id in ids {
            if let Some(op) = self.pending.remove(&id) {
                self.stats.undeliverable += 1;
                self.complete(op, NiFail::Undeliverable, 0, 0, &[]);
            }
        }
    }

    /// Lands reply data, posts the ACK/REPLY event and counts, per the MD's options and the
    /// ack mode. Failures are always reported (event with `ni_fail`, CT failure), even when the
    /// MD disables success events.
    fn complete(
        &mut self,
        op: PendingOp,
        mut fail: NiFail,
        mlength: u64,
        offset: u64,
        data: &[u8],
    ) {
        let Ok(m) = self.mds.get_mut("complete", op.md) else {
            return;
        };
        m.pending = m.pending.saturating_sub(1);
        let start = m.offset + op.local_offset;
        if fail == NiFail::Ok && !data.is_empty() && m.region.write(start as usize, data).is_err() {
            // Unreachable: the range was checked at issue and data.len() <= length.
            fail = NiFail::Segv;
        }
        let (eq, ct, opts) = (m.eq, m.ct, m.options);
        let reply = op.kind.has_reply();
        let mut ev = blank(if reply {
            EventKind::Reply
        } else {
            EventKind::Ack
        });
        ev.start = m.region.origin().wrapping_add(start);
        ev.user_ptr = op.user_ptr;
        ev.hdr_data = op.hdr_data;
        ev.match_bits = op.match_bits;
        ev.rlength = op.length;
        ev.mlength = if fail == NiFail::Ok { mlength } else { 0 };
        ev.remote_offset = offset;
        ev.initiator = op.target;
        ev.uid = self.uid;
        ev.pt_index = op.pt_index;
        ev.ni_fail = fail;
        ev.atomic_op = op.atomic.map(|a| a.0);
        ev.atomic_type = op.atomic.map(|a| a.1);
        let ok = fail == NiFail::Ok;
        let full = reply
            || matches!(
                op.ack_req,
                AckReq::Ack | AckReq::Confirmed | AckReq::ConfirmedAck
            );
        if let (Some(eq), true) = (eq, full) {
            if !ok || !opts.contains(MdOptions::EVENT_SUCCESS_DISABLE) {
                self.post(eq, ev);
            }
        }
        let flag = if reply {
            MdOptions::EVENT_CT_REPLY
        } else {
            MdOptions::EVENT_CT_ACK
        };
        if let (Some(ct), true) = (ct, opts.contains(flag)) {
            let bytes = opts
                .contains(MdOptions::EVENT_CT_BYTES)
                .then_some(ev.mlength);
            self.count(ct, ok, bytes);
        }
    }
}

/// Whether an operation asking for `ack_req` is confirmed by the transport (to another
/// interface than this one).
fn wire_is_confirmed(ack_req: AckReq, to_self: bool) -> bool {
    !to_self
        && matches!(
            ack_req,
            AckReq::Confirmed | AckReq::ConfirmedAck | AckReq::ConfirmedCtAck
        )
}

/// Whether an operation from an MD with `options` leaves from the MD's region in place: a put
/// from an `IN_PLACE` MD of at least [`IN_PLACE_MIN`] bytes that asks for an ACK (the owner
/// keeps the bytes until then).
fn sends_in_place(options: MdOptions, kind: OpKind, length: u64, ack_req: AckReq) -> bool {
    options.contains(MdOptions::IN_PLACE)
        && length >= IN_PLACE_MIN
        && ack_req != AckReq::None
        && kind == OpKind::Put
}
