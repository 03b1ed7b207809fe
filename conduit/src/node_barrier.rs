//! The node barrier as a barrier of the whole job: when every rank shares this rank's memory
//! node, `rgasnet-pshm`'s node barrier (cache lines written in shared memory: a dissemination
//! barrier, or one shared counter on a crowded host, `RGASNET_PSHM_BARRIER`) replaces the
//! rounds of messages of the network's dissemination barrier. The arrivals' barrier names are
//! merged on the way (the outcome every rank reads once the barrier completes), and each
//! arrival leaves a value of its own (which barrier it arrived at) for diagnostics.
//! On a host with more ranks than CPUs the waiters yield the CPU to the ranks still to arrive
//! (see [`crate::config::WaitPoll`]).

use std::time::Duration;

use rgasnet_pshm::{BarrierName, BarrierTicket, BarrierWaiting};

use crate::client::Client;
use crate::shm::Shm;

/// An arrival at the job-wide node barrier ([`Client::node_barrier_arrive`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a barrier arrival must be waited for"]
pub struct NodeBarrierTicket(BarrierTicket);

impl Client {
    fn job_node(&self) -> Option<&Shm> {
        let shm = self.inner.attached.get()?.shm.as_ref()?;
        // Every rank of the job in this one supernode (which has at least two members).
        (self.inner.supernode.len() == self.inner.size as usize).then_some(shm)
    }

    /// Arrives at the job-wide node barrier with a name to agree on and `value` (for
    /// diagnostics, see [`Client::node_barrier_value`]); `None` unless every rank of the job
    /// shares this rank's memory node (after attach, with shared memory on), in which case
    /// every rank must arrive at every barrier.
    pub fn node_barrier_arrive(&self, name: BarrierName, value: u64) -> Option<NodeBarrierTicket> {
        Some(NodeBarrierTicket(
            self.job_node()?.node.barrier_arrive_with(name, value),
        ))
    }

    /// The name the arrivals at the completed barrier of `ticket` agreed on (see
    /// `rgasnet_pshm::BarrierName`); only meaningful once [`Client::node_barrier_done`] said so.
    pub fn node_barrier_name(&self, ticket: NodeBarrierTicket) -> BarrierName {
        self.job_node()
            .map_or_else(BarrierName::default, |shm| shm.node.barrier_name(ticket.0))
    }

    /// Whether every rank has arrived at the barrier of `ticket`.
    pub fn node_barrier_done(&self, ticket: NodeBarrierTicket) -> bool {
        self.job_node()
            .is_some_and(|shm| shm.node.barrier_done(ticket.0))
    }

    /// One step of waiting for the barrier of `ticket` (see `rgasnet_pshm::Node::barrier_pause`):
    /// spins or yields until `waiting` has lasted the poll budget, then sleeps at most `nap`
    /// on the barrier. Returns whether it completed.
    pub fn node_barrier_pause(
        &self,
        ticket: NodeBarrierTicket,
        waiting: &mut BarrierWaiting,
        nap: Duration,
    ) -> bool {
        self.job_node()
            .is_some_and(|shm| shm.node.barrier_pause(ticket.0, waiting, nap))
    }

    /// The value `rank` brought to the barrier of `ticket`: once it completed, this
    /// barrier's; before, that rank's value of this barrier if it has arrived, else of an
    /// earlier one (values should say which barrier they belong to). `None` for a rank
    /// outside the job or without a node barrier.
    pub fn node_barrier_value(&self, ticket: NodeBarrierTicket, rank: u32) -> Option<u64> {
        // The node's members are the job's ranks, sorted: `rank` is its own index.
        self.job_node()?.node.barrier_value(ticket.0, rank as usize)
    }

    /// Whether `rank` has done its part of the barrier of `ticket` (see
    /// `rgasnet_pshm::Node::barrier_member_finished`): `None` when its arrival is its whole
    /// part (the shared counter), which [`Client::node_barrier_value`] tells.
    pub fn node_barrier_finished(&self, ticket: NodeBarrierTicket, rank: u32) -> Option<bool> {
        self.job_node()?
            .node
            .barrier_member_finished(ticket.0, rank as usize)
    }
}
