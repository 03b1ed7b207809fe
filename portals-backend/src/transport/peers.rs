//! The per-peer state of a transport, kept in a vector.
//!
//! The ready queue, the timers and the unsettled list name peers by slot, so the per-message
//! path hashes an address only where one comes in from outside (a received datagram, a
//! message to send), and a one-entry cache answers that for the peer seen last — in a
//! round trip, always the same one. Peers are never removed (a failed peer keeps its slot and
//! its failure), so slots stay valid for the transport's life.

use hashbrown::HashMap;

use super::Peer;
use crate::types::PhysId;

pub(super) struct PeerTable {
    slots: Vec<Peer>,
    index: HashMap<PhysId, usize>,
    /// The address looked up last and its slot.
    last: Option<(PhysId, usize)>,
}

impl PeerTable {
    pub(super) fn new() -> Self {
        PeerTable {
            slots: Vec::new(),
            index: HashMap::new(),
            last: None,
        }
    }

    /// The slot of `id`, if known (without touching the cache: for read-only queries).
    pub(super) fn find(&self, id: PhysId) -> Option<usize> {
        match self.last {
            Some((last, slot)) if last == id => Some(slot),
            _ => self.index.get(&id).copied(),
        }
    }

    /// The slot of `id`, created by `make` if the peer is new.
    #[inline]
    pub(super) fn slot_or_insert(&mut self, id: PhysId, make: impl FnOnce() -> Peer) -> usize {
        if let Some((last, slot)) = self.last {
            if last == id {
                return slot;
            }
        }
        let slot = match self.index.get(&id) {
            Some(&slot) => slot,
            None => {
                let slot = self.slots.len();
                self.slots.push(make());
                self.index.insert(id, slot);
                slot
            }
        };
        self.last = Some((id, slot));
        slot
    }

    #[inline]
    pub(super) fn get_mut(&mut self, slot: usize) -> Option<&mut Peer> {
        self.slots.get_mut(slot)
    }

    /// Every peer, by slot.
    pub(super) fn all(&self) -> &[Peer] {
        &self.slots
    }

    /// [`PeerTable::all`], to change them.
    pub(super) fn all_mut(&mut self) -> &mut [Peer] {
        &mut self.slots
    }

    /// The peer at `id`, if known.
    pub(super) fn by_id(&self, id: PhysId) -> Option<&Peer> {
        self.find(id).and_then(|slot| self.slots.get(slot))
    }

    /// [`PeerTable::by_id`], to change it.
    pub(super) fn by_id_mut(&mut self, id: PhysId) -> Option<&mut Peer> {
        self.find(id).and_then(|slot| self.slots.get_mut(slot))
    }
}
