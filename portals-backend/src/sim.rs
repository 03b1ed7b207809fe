//! A deterministic simulated network for testing sans-IO protocol code under faults.
//!
//! [`SimNetwork`] carries datagrams between endpoints named by [`PhysId`] in virtual time,
//! with seeded loss, duplication, delay, reordering, an MTU, and partitions. The same seed and
//! the same sequence of calls give the same run, bit for bit.
//!
//! [`SimNode`] is what the network drives (a [`Transport`], or an engine wrapping one), and
//! [`run_until_quiescent`] runs a set of nodes with a virtual clock until nothing is in flight
//! and no timer is armed, failing (not hanging) when a step budget or virtual deadline is
//! exceeded.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use hashbrown::{HashMap, HashSet};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::transport::Transport;
use crate::types::PhysId;

/// Fault model of a [`SimNetwork`].
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Probability that a datagram is lost.
    pub loss: f64,
    /// Probability that a datagram is delivered twice (the copy gets its own delay).
    pub duplicate: f64,
    /// Probability that a datagram is held back by an extra `reorder_delay`, letting later
    /// ones overtake it. Otherwise each link is FIFO, as real paths mostly are: a datagram
    /// never arrives before one sent earlier on the same (from, to) link.
    pub reorder: f64,
    /// Extra delay of a reordered datagram.
    pub reorder_delay: Duration,
    /// Smallest one-way delay.
    pub delay_min: Duration,
    /// Largest one-way delay (uniform between the two, but FIFO per link, see `reorder`).
    pub delay_max: Duration,
    /// Datagrams longer than this are dropped (and counted).
    pub mtu: usize,
}

impl Default for SimConfig {
    /// A perfect network: no faults, 10 µs delay, 65 507-byte MTU.
    fn default() -> Self {
        SimConfig {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            delay_min: Duration::from_micros(10),
            delay_max: Duration::from_micros(10),
            mtu: 65_507,
        }
    }
}

impl SimConfig {
    /// A hostile network: the given loss rate, 5 % duplication, 10 % reordering, variable delay.
    pub fn lossy(loss: f64) -> Self {
        SimConfig {
            loss,
            duplicate: 0.05,
            reorder: 0.10,
            reorder_delay: Duration::from_micros(300),
            delay_min: Duration::from_micros(20),
            delay_max: Duration::from_micros(200),
            mtu: 65_507,
        }
    }
}

/// What the network did, for assertions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Datagrams handed to `send`.
    pub sent: u64,
    /// Datagrams handed out by `deliver_due`.
    pub delivered: u64,
    /// Lost at random.
    pub lost: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Held back for reordering.
    pub reordered: u64,
    /// Dropped for exceeding the MTU.
    pub oversize: u64,
    /// Dropped by a partition.
    pub partitioned: u64,
    /// Addressed to no known node (only counted by [`run_until_quiescent`]).
    pub unroutable: u64,
}

/// A datagram handed out by the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimDelivery {
    /// Destination.
    pub to: PhysId,
    /// Source.
    pub from: PhysId,
    /// Bytes.
    pub bytes: Vec<u8>,
}

struct InFlight {
    at: Instant,
    /// Tie-breaker: datagrams due at the same instant leave in send order.
    order: u64,
    d: SimDelivery,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    // Reversed: BinaryHeap is a max-heap and the earliest datagram must come out first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.order).cmp(&(self.at, self.order))
    }
}

/// A seeded, virtual-time datagram network.
pub struct SimNetwork {
    rng: StdRng,
    cfg: SimConfig,
    queue: BinaryHeap<InFlight>,
    order: u64,
    partitioned: HashSet<PhysId>,
    /// Latest in-order arrival time per (from, to) link, to keep links FIFO.
    link_tail: HashMap<(PhysId, PhysId), Instant>,
    stats: SimStats,
}

impl SimNetwork {
    /// A network with fault model `cfg`, seeded by `seed`.
    pub fn new(seed: u64, cfg: SimConfig) -> Self {
        SimNetwork {
            rng: StdRng::seed_from_u64(seed),
            cfg,
            queue: BinaryHeap::new(),
            order: 0,
            partitioned: HashSet::new(),
            link_tail: HashMap::new(),
            stats: SimStats::default(),
        }
    }

    /// The fault model.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Replaces the fault model (datagrams in flight keep their schedule).
    pub fn set_config(&mut self, cfg: SimConfig) {
        self.cfg = cfg;
    }

    /// Counters.
    pub fn stats(&self) -> &SimStats {
        &self.stats
    }

    /// Cuts `id` off: everything to or from it is dropped, including datagrams in flight
    /// when they come due.
    pub fn partition(&mut self, id: PhysId) {
        self.partitioned.insert(id);
    }

    /// Reconnects `id`.
    pub fn heal(&mut self, id: PhysId) {
        self.partitioned.remove(&id);
    }

    /// Sends `bytes` from `from` to `to` at virtual time `now`.
    pub fn send(&mut self, now: Instant, from: PhysId, to: PhysId, bytes: &[u8]) {
        self.stats.sent += 1;
        if bytes.len() > self.cfg.mtu {
            self.stats.oversize += 1;
            return;
        }
        if self.partitioned.contains(&from) || self.partitioned.contains(&to) {
            self.stats.partitioned += 1;
            return;
        }
        if self.chance(self.cfg.loss) {
            self.stats.lost += 1;
            return;
        }
        let copies = if self.chance(self.cfg.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = self.delay();
            let at = if self.chance(self.cfg.reorder) {
                self.stats.reordered += 1;
                now + delay + self.cfg.reorder_delay
            } else {
                let tail = self.link_tail.entry((from, to)).or_insert(now);
                let at = (now + delay).max(*tail);
                *tail = at;
                at
            };
            self.order += 1;
            self.queue.push(InFlight {
                at,
                order: self.order,
                d: SimDelivery {
                    to,
                    from,
                    bytes: bytes.to_vec(),
                },
            });
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random::<f64>() < p
    }

    fn delay(&mut self) -> Duration {
        let (lo, hi) = (self.cfg.delay_min, self.cfg.delay_max);
        if hi <= lo {
            return lo;
        }
        let span = (hi - lo).as_nanos() as u64;
        lo + Duration::from_nanos(self.rng.random_range(0..=span))
    }

    /// When the next datagram comes due.
    pub fn next_delivery(&self) -> Option<Instant> {
        self.queue.peek().map(|f| f.at)
    }

    /// Whether datagrams are in flight.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// The next datagram due at or before `now`, if any.
    pub fn deliver_due(&mut self, now: Instant) -> Option<SimDelivery> {
        loop {
            if self.queue.peek()?.at > now {
                return None;
            }
            let f = self.queue.pop()?;
            if self.partitioned.contains(&f.d.from) || self.partitioned.contains(&f.d.to) {
                self.stats.partitioned += 1;
                continue;
            }
            self.stats.delivered += 1;
            return Some(f.d);
        }
    }
}

/// Something the simulated network can drive: the sans-IO surface of a transport.
pub trait SimNode {
    /// The node's address.
    fn id(&self) -> PhysId;
    /// A datagram arrived.
    fn handle_datagram(&mut self, now: Instant, from: PhysId, bytes: &[u8]);
    /// Called once after each batch of datagrams and timeouts, before transmitting: where the
    /// layer above reacts to events (and may send answers).
    fn after_input(&mut self, _now: Instant) {}
    /// Next datagram to send (see [`Transport::poll_transmit`]).
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PhysId>;
    /// Earliest deadline.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Deadlines at or before `now` fire.
    fn handle_timeout(&mut self, now: Instant);
}

impl SimNode for Transport {
    fn id(&self) -> PhysId {
        self.local()
    }
    fn handle_datagram(&mut self, now: Instant, from: PhysId, bytes: &[u8]) {
        Transport::handle_datagram(self, now, from, bytes)
    }
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PhysId> {
        Transport::poll_transmit(self, now, out)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Transport::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Transport::handle_timeout(self, now)
    }
}

/// [`run_until_quiescent`] gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// More steps than allowed: something keeps the system busy forever.
    #[error("simulation still busy after {steps} steps (virtual time {elapsed:?})")]
    TooManySteps {
        /// Steps taken.
        steps: u64,
        /// Virtual time elapsed.
        elapsed: Duration,
    },
    /// Virtual time passed the deadline.
    #[error("simulation still busy at the virtual deadline ({elapsed:?} elapsed)")]
    Deadline {
        /// Virtual time elapsed.
        elapsed: Duration,
    },
    /// Two nodes share an address.
    #[error("two nodes have the address {0}")]
    DuplicateNode(PhysId),
}

/// Bounds for [`run_until_quiescent`].
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// Most scheduling steps.
    pub max_steps: u64,
    /// Latest virtual time.
    pub deadline: Instant,
}

/// Drives `nodes` over `net` from `*now` until no datagram is in flight and no node has a
/// timer armed (or nothing to transmit). `*now` advances in virtual time. Each step delivers
/// every datagram due at the current instant as one batch per node, fires due timers, calls
/// `after_input` on the nodes touched, and drains every node's `poll_transmit`.
pub fn run_until_quiescent<N: SimNode>(
    net: &mut SimNetwork,
    nodes: &mut [N],
    now: &mut Instant,
    limits: RunLimits,
) -> Result<(), SimError> {
    let start = *now;
    let mut index: HashMap<PhysId, usize> = HashMap::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        if index.insert(n.id(), i).is_some() {
            return Err(SimError::DuplicateNode(n.id()));
        }
    }
    let mut buf = Vec::with_capacity(net.config().mtu);
    let mut touched = vec![false; nodes.len()];
    let mut steps = 0u64;
    // Let nodes react to anything queued before the run (e.g. sends made by the test).
    for n in nodes.iter_mut() {
        n.after_input(*now);
    }
    loop {
        for n in nodes.iter_mut() {
            let from = n.id();
            while let Some(to) = n.poll_transmit(*now, &mut buf) {
                net.send(*now, from, to, &buf);
            }
        }
        let next_timer = nodes.iter().filter_map(|n| n.poll_timeout()).min();
        let next = match (net.next_delivery(), next_timer) {
            (None, None) => return Ok(()),
            (a, b) => a.into_iter().chain(b).min(),
        };
        let Some(next) = next else { return Ok(()) };
        steps += 1;
        if steps > limits.max_steps {
            return Err(SimError::TooManySteps {
                steps,
                elapsed: now.saturating_duration_since(start),
            });
        }
        if next > limits.deadline {
            return Err(SimError::Deadline {
                elapsed: now.saturating_duration_since(start),
            });
        }
        *now = (*now).max(next);
        touched.fill(false);
        while let Some(d) = net.deliver_due(*now) {
            match index.get(&d.to) {
                Some(&i) => {
                    if let Some(n) = nodes.get_mut(i) {
                        n.handle_datagram(*now, d.from, &d.bytes);
                    }
                    if let Some(t) = touched.get_mut(i) {
                        *t = true;
                    }
                }
                None => net.stats.unroutable += 1,
            }
        }
        for (n, t) in nodes.iter_mut().zip(touched.iter_mut()) {
            if n.poll_timeout().is_some_and(|d| d <= *now) {
                n.handle_timeout(*now);
                *t = true;
            }
            if *t {
                n.after_input(*now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(pid: u32) -> PhysId {
        PhysId {
            nid: 0x7f00_0001,
            pid,
        }
    }

    fn trace(seed: u64) -> (Vec<(Duration, u32, Vec<u8>)>, SimStats) {
        let t0 = Instant::now();
        let mut net = SimNetwork::new(seed, SimConfig::lossy(0.2));
        for i in 0..200u32 {
            net.send(
                t0 + Duration::from_micros(u64::from(i)),
                id(1),
                id(2),
                &i.to_le_bytes(),
            );
        }
        let mut out = Vec::new();
        while let Some(now) = net.next_delivery() {
            while let Some(d) = net.deliver_due(now) {
                assert_eq!((d.from, d.to), (id(1), id(2)));
                out.push((now - t0, d.to.pid, d.bytes));
            }
        }
        (out, net.stats().clone())
    }

    #[test]
    fn same_seed_same_run() {
        let (a, sa) = trace(7);
        let (b, sb) = trace(7);
        assert_eq!(a, b);
        assert_eq!(sa, sb);
        let (c, _) = trace(8);
        assert_ne!(a, c);
    }

    #[test]
    fn faults_happen_and_are_counted() {
        let (out, s) = trace(42);
        assert_eq!(s.sent, 200);
        assert!(s.lost > 0 && s.duplicated > 0 && s.reordered > 0, "{s:?}");
        assert_eq!(s.delivered, 200 - s.lost + s.duplicated);
        assert_eq!(out.len() as u64, s.delivered);
        // Reordering happened: some payload arrives after a larger one.
        let seq: Vec<u32> = out
            .iter()
            .map(|(_, _, b)| u32::from_le_bytes(b[..4].try_into().unwrap()))
            .collect();
        assert!(seq.windows(2).any(|w| w[0] > w[1]));
    }

    #[test]
    fn mtu_and_partition_drop() {
        let t0 = Instant::now();
        let cfg = SimConfig {
            mtu: 100,
            ..SimConfig::default()
        };
        let mut net = SimNetwork::new(1, cfg);
        net.send(t0, id(1), id(2), &[0u8; 101]);
        net.send(t0, id(1), id(2), &[1u8; 100]);
        net.partition(id(3));
        net.send(t0, id(1), id(3), &[2u8; 10]);
        net.send(t0, id(3), id(1), &[3u8; 10]);
        // In flight when the partition starts: dropped at delivery.
        net.send(t0, id(4), id(1), &[4u8; 10]);
        net.partition(id(4));
        assert_eq!(net.deliver_due(t0), None, "nothing is due before the delay");
        let later = t0 + Duration::from_millis(1);
        let d = net.deliver_due(later).unwrap();
        assert_eq!((d.from, d.to, d.bytes), (id(1), id(2), vec![1u8; 100]));
        assert_eq!(net.deliver_due(later), None);
        assert_eq!(net.stats().oversize, 1);
        assert_eq!(net.stats().partitioned, 3);
        net.heal(id(3));
        net.send(later, id(3), id(1), &[5u8; 3]);
        let d = net.deliver_due(later + Duration::from_millis(1)).unwrap();
        assert_eq!(d.bytes, vec![5u8; 3]);
    }
}
