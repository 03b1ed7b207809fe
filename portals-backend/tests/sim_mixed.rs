//! Part D acceptance: 10,000 mixed operations (puts with every ack mode, gets, atomic SUMs,
//! fetch-atomic SUMs, swaps, and puts to a flow-controlled portal that keeps running out of
//! receive blocks) among 4 engines, each on its own reliable transport, over a simulated
//! network with 10 % loss, duplication and reordering, in virtual time with a fixed seed.
//!
//! Every engine runs a little application in `after_input` (called by the simulator after each
//! batch of input): it drains its event queues and checks each event field by field against a
//! model derived from a pre-generated script, re-posts exhausted receive blocks and re-enables
//! the flow-controlled portal, resends what came back `PT_DISABLED`, and keeps up to `WINDOW`
//! of its own operations outstanding. At the end every byte of every target and landing region
//! is compared with the model, and every operation must have produced exactly the events it
//! should, exactly once.

mod sim_model;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rgasnet_portals::sim::{run_until_quiescent, RunLimits, SimConfig, SimNetwork, SimNode};
use rgasnet_portals::types::{AckReq, PhysId, SrIndex};

use sim_model::*;

/// Transport settings for the simulation: small datagrams so that puts and gets of up to a
/// few kilobytes are fragmented and reassembled.
fn transport_config() -> rgasnet_portals::transport::TransportConfig {
    rgasnet_portals::transport::TransportConfig {
        job_key: 0x0123_4567_89ab_cdef,
        max_datagram: 1200,
        ..Default::default()
    }
}

fn phys(i: usize) -> PhysId {
    PhysId {
        nid: 0x0a00_0001 + i as u32,
        pid: 4000,
    }
}

#[test]
fn ten_thousand_mixed_operations_among_four_engines_under_loss() {
    let script = Rc::new(Script::generate());
    assert_eq!(script.ops.len(), NODES * OPS_PER_NODE);
    let ledger = Rc::new(RefCell::new(Ledger::new(script.ops.len())));
    let map: Vec<PhysId> = (0..NODES).map(phys).collect();
    let t0 = Instant::now();
    let mut nodes: Vec<Node> = (0..NODES)
        .map(|i| Node::new(i, &map, transport_config(), t0, &script, &ledger))
        .collect();

    let mut net = SimNetwork::new(SEED, SimConfig::lossy(0.10));
    let mut now = t0;
    let limits = RunLimits {
        max_steps: 20_000_000,
        deadline: t0 + Duration::from_secs(3600),
    };
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits).expect("simulation settles");

    // Everything was issued and nothing is left waiting.
    for n in &nodes {
        assert_eq!(
            n.next_op, OPS_PER_NODE,
            "node {} issued its whole script",
            n.idx
        );
        assert_eq!(
            n.in_flight, 0,
            "node {} has no operation outstanding",
            n.idx
        );
        assert!(n.resend.is_empty());
        assert_eq!(n.stack.engine.pending_ops(), 0);
    }
    for n in &mut nodes {
        n.drain();
    }

    let l = ledger.borrow();
    check_events_exactly_once(&script, &l);
    for n in &nodes {
        n.check_memory(&l);
        n.check_counters(&l);
    }
    check_fetch_linearizable(&script, &l);

    // The faults and the recovery paths were exercised, and nothing went unaccounted.
    let s = net.stats().clone();
    assert!(s.lost > 0 && s.duplicated > 0 && s.reordered > 0, "{s:?}");
    assert_eq!(s.unroutable + s.oversize + s.partitioned, 0, "{s:?}");
    let (mut retransmits, mut duplicates) = (0, 0);
    for n in &nodes {
        let ts = n.stack.transport.stats();
        retransmits += ts.retransmits;
        duplicates += ts.duplicates;
        assert_eq!(
            ts.dropped_malformed + ts.dropped_foreign_job + ts.dropped_bad_magic,
            0
        );
        assert_eq!(ts.peers_failed, 0, "no peer may be declared failed");
        let es = n.stack.engine.stats();
        assert_eq!(
            (es.malformed, es.unexpected_responses, es.eq_overflows),
            (0, 0, 0),
            "engine {} stats {es:?}",
            n.idx
        );
        assert_eq!((es.no_ni, es.bad_initiator, es.undeliverable), (0, 0, 0));
    }
    eprintln!(
        "virtual {:?}; net {s:?}; retransmits {retransmits}, duplicates suppressed {duplicates}; \
         PT_DISABLED events {}, refusals {:?}, resends {}, enables {}, blocks unlinked {}",
        now - t0,
        l.pt_disabled_events,
        l.pt_disabled_acks,
        l.resends,
        l.enables,
        l.auto_unlinks
    );
    assert!(retransmits > 0 && duplicates > 0);
    assert!(l.pt_disabled_events > 0, "the portal ran out of blocks");
    assert!(
        l.resends > 0 && l.enables > 0,
        "initiators resent, targets re-enabled"
    );
    assert!(l.auto_unlinks > 0);
    // Every refusal the targets counted came back to an initiator, and vice versa.
    for n in &nodes {
        let drops = n
            .stack
            .engine
            .ni_status(n.ni, SrIndex::DropCount)
            .expect("status");
        assert_eq!(drops, l.pt_disabled_acks[n.idx], "node {}", n.idx);
    }
    assert_eq!(l.resends, l.pt_disabled_acks.iter().sum::<u64>());
}

/// Every operation produced exactly the events it should, each exactly once.
fn check_events_exactly_once(script: &Script, l: &Ledger) {
    for op in &script.ops {
        let id = op.id as usize;
        let tries = 1 + l.fc_refused[id];
        let (sends, completions) = match op.kind {
            Kind::Put {
                ack: AckReq::Ack, ..
            } => (1, 1),
            Kind::Put { .. } => (1, 0),
            Kind::Get { .. } => (0, 1),
            Kind::Sum { .. } | Kind::FetchSum { .. } | Kind::Swap { .. } => (1, 1),
            Kind::Fc => (tries, 1),
        };
        assert_eq!(l.sent[id], sends, "SEND events of {op:?}");
        assert_eq!(l.completed[id], completions, "completions of {op:?}");
        assert_eq!(l.target_seen[id], 1, "target events of {op:?}");
        if matches!(op.kind, Kind::Fc) {
            let (_, start) = l.fc_landing[id].expect("landed");
            assert_eq!(
                l.fc_ack_offset[id],
                Some(start),
                "ACK names where {op:?} landed"
            );
        }
    }
}

/// The fetch-atomic SUMs on each target's counter form one sequence: sorted by the value each
/// fetched, every fetch saw exactly the sum of the operands before it.
fn check_fetch_linearizable(script: &Script, l: &Ledger) {
    for target in 0..NODES {
        let mut seen: Vec<(u64, u64)> = script
            .ops
            .iter()
            .filter_map(|op| match op.kind {
                Kind::FetchSum { v, .. } if op.to == target => {
                    Some((l.fetched[op.id as usize].expect("fetched"), v))
                }
                _ => None,
            })
            .collect();
        seen.sort_unstable();
        let mut expect = 0u64;
        for (fetched, v) in &seen {
            assert_eq!(*fetched, expect, "fetch-add chain at target {target}");
            expect = expect.wrapping_add(*v);
        }
    }
}

impl SimNode for Node {
    fn id(&self) -> PhysId {
        self.stack.local()
    }
    fn handle_datagram(&mut self, now: Instant, from: PhysId, bytes: &[u8]) {
        self.stack.handle_datagram(now, from, bytes);
    }
    fn after_input(&mut self, now: Instant) {
        // The application's turn: react to events, then issue, until nothing changes (ops to
        // self complete inside `pump`, without any datagram).
        loop {
            self.stack.pump(now);
            let mut progressed = self.drain();
            progressed |= self.housekeeping();
            progressed |= self.issue();
            if !progressed {
                break;
            }
        }
    }
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PhysId> {
        self.stack.poll_transmit(now, out)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.stack.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.stack.handle_timeout(now);
    }
}

#[test]
fn the_script_covers_every_operation_kind() {
    let s = Script::generate();
    let count = |f: &dyn Fn(&Kind) -> bool| s.ops.iter().filter(|o| f(&o.kind)).count();
    for ack in [AckReq::Ack, AckReq::CtAck, AckReq::None] {
        assert!(count(&|k| matches!(k, Kind::Put { ack: a, .. } if *a == ack)) > 100);
    }
    assert!(count(&|k| matches!(k, Kind::Put { len, .. } if *len > 2 * 872)) > 50);
    assert!(count(&|k| matches!(k, Kind::Get { len, .. } if *len > 872)) > 50);
    assert!(count(&|k| matches!(k, Kind::Sum { .. })) > 500);
    assert!(count(&|k| matches!(k, Kind::FetchSum { .. })) > 500);
    assert!(count(&|k| matches!(k, Kind::Swap { .. })) > 500);
    assert!(count(&|k| matches!(k, Kind::Fc)) > 1000);
    assert!(s.ops.iter().filter(|o| o.from == o.to).count() > 1000);
}
