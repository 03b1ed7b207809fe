//! Immediate messages: delivery with the sender's rank, the bounds on both sides, refusal of
//! a forged sender, and the count of those lost with a failed peer.

use super::*;
use crate::engine::immediate::{ImmediateBatch, IMMEDIATE_BACKLOG_MAX, IMMEDIATE_OUTSTANDING_MAX};
use crate::proto::{encode_immediate_into, MAX_IMMEDIATE};

const NOMATCH_LOGICAL: NiKind = NiKind {
    matching: Matching::NoMatching,
    addressing: Addressing::Logical,
};

fn taken(e: &mut Engine, ni: NiHandle) -> Vec<(Rank, Vec<u8>)> {
    let mut out = ImmediateBatch::default();
    e.take_immediates(ni, &mut out, usize::MAX);
    out.iter().map(|m| (m.source, m.payload.to_vec())).collect()
}

#[test]
fn an_immediate_arrives_once_with_its_senders_rank_and_is_confirmed() {
    let mut net = Net::new(3, MATCHING_LOGICAL);
    assert!(net.e[2]
        .send_immediate(net.ni[2], ProcessId::Rank(1), b"hello", false)
        .unwrap());
    assert_eq!(net.e[2].immediates_unconfirmed(), 1);
    let (to, msg) = net.e[2].poll_outgoing().unwrap();
    assert_eq!(to, phys(1));
    let token = msg
        .confirm()
        .expect("an immediate asks the transport to confirm it");
    net.e[1].handle_message(phys(2), &msg.to_bytes());
    assert_eq!(net.e[1].immediates_waiting(), 1);
    let ni1 = net.ni[1];
    assert_eq!(taken(&mut net.e[1], ni1), vec![(2, b"hello".to_vec())]);
    assert_eq!(net.e[1].immediates_waiting(), 0);
    let s = net.e[1].stats();
    assert_eq!(
        (s.immediates_received, s.events_posted, s.requests),
        (1, 0, 0)
    );
    net.e[2].handle_confirmed(phys(1), token);
    assert_eq!(net.e[2].immediates_unconfirmed(), 0);
    assert_eq!(net.e[2].stats().immediates_sent, 1);
}

#[test]
fn a_full_sender_sends_nothing_until_a_confirmation_unless_forced() {
    let mut net = Net::new(2, MATCHING_LOGICAL);
    let ni = net.ni[0];
    let mut tokens = Vec::new();
    for _ in 0..IMMEDIATE_OUTSTANDING_MAX {
        assert!(net.e[0]
            .send_immediate(ni, ProcessId::Rank(1), b"x", false)
            .unwrap());
        tokens.push(net.e[0].poll_outgoing().unwrap().1.confirm().unwrap());
    }
    assert!(!net.e[0]
        .send_immediate(ni, ProcessId::Rank(1), b"x", false)
        .unwrap());
    assert!(
        net.e[0].poll_outgoing().is_none(),
        "a refused send queued a message"
    );
    assert!(net.e[0]
        .send_immediate(ni, ProcessId::Rank(1), b"x", true)
        .unwrap());
    assert!(net.e[0].poll_outgoing().is_some());
    // Two confirmations bring the count under the bound again.
    net.e[0].handle_confirmed(phys(1), tokens[0]);
    net.e[0].handle_confirmed(phys(1), tokens[1]);
    assert!(net.e[0]
        .send_immediate(ni, ProcessId::Rank(1), b"x", false)
        .unwrap());
    assert_eq!(
        net.e[0].immediates_unconfirmed(),
        u64::from(IMMEDIATE_OUTSTANDING_MAX)
    );
}

#[test]
fn the_backlog_reports_full_and_hands_out_in_order() {
    let mut net = Net::new(2, MATCHING_LOGICAL);
    for i in 0..IMMEDIATE_BACKLOG_MAX as u32 {
        let sent = net.e[0].send_immediate(net.ni[0], ProcessId::Rank(1), &i.to_le_bytes(), true);
        assert!(sent.unwrap());
    }
    net.run();
    assert!(net.e[1].immediate_backlog_full());
    let mut out = ImmediateBatch::default();
    net.e[1].take_immediates(net.ni[1], &mut out, 10);
    let got: Vec<u32> = out
        .iter()
        .map(|m| u32::from_le_bytes(m.payload.try_into().unwrap()))
        .collect();
    assert_eq!(got, (0..10).collect::<Vec<u32>>());
    assert!(!net.e[1].immediate_backlog_full());
    assert_eq!(net.e[1].immediates_waiting(), IMMEDIATE_BACKLOG_MAX - 10);
}

#[test]
fn another_nis_immediates_stay_queued_in_order() {
    let mut net = Net::new(2, MATCHING_LOGICAL);
    let map: Vec<PhysId> = (0..2).map(phys).collect();
    let mut other = [None; 2];
    for (i, slot) in other.iter_mut().enumerate() {
        let (h, _) = net.e[i].ni_init(NOMATCH_LOGICAL, None).unwrap();
        net.e[i].set_map(h, &map).unwrap();
        *slot = Some(h);
    }
    let (a0, b0) = (net.ni[0], other[0].unwrap());
    // Every size, so that the bytes of the one NI's messages are taken from between the
    // other's, and the largest fits.
    let sizes = [1usize, 300, MAX_IMMEDIATE, 7, 0, 64];
    let msg = |i: usize| vec![i as u8 + 1; sizes[i]];
    for i in 0..sizes.len() {
        let ni = if i % 2 == 0 { b0 } else { a0 };
        assert!(net.e[0]
            .send_immediate(ni, ProcessId::Rank(1), &msg(i), false)
            .unwrap());
    }
    net.run();
    let (a1, b1) = (net.ni[1], other[1].unwrap());
    assert_eq!(
        taken(&mut net.e[1], a1),
        vec![(0, msg(1)), (0, msg(3)), (0, msg(5))]
    );
    // Taken a few at a time, into a batch that still holds earlier messages.
    let mut out = ImmediateBatch::default();
    net.e[1].take_immediates(b1, &mut out, 2);
    net.e[1].take_immediates(b1, &mut out, 2);
    let got: Vec<(Rank, Vec<u8>)> = out.iter().map(|m| (m.source, m.payload.to_vec())).collect();
    assert_eq!(got, vec![(0, msg(0)), (0, msg(2)), (0, msg(4))]);
    assert_eq!(net.e[1].immediates_waiting(), 0);
}

#[test]
fn an_immediate_from_a_rank_it_does_not_come_from_is_dropped() {
    let mut net = Net::new(3, MATCHING_LOGICAL);
    // Claims rank 2, comes from rank 0's interface; then one from outside the map.
    let forged = encode_immediate_into(Vec::new(), MATCHING_LOGICAL, 2, b"x").unwrap();
    net.e[1].handle_message(phys(0), &forged);
    net.e[1].handle_message(phys(9), &forged);
    // An NI kind that is not open there.
    let stray = encode_immediate_into(Vec::new(), NOMATCH_LOGICAL, 0, b"x").unwrap();
    net.e[1].handle_message(phys(0), &stray);
    assert_eq!(net.e[1].immediates_waiting(), 0);
    let s = net.e[1].stats();
    assert_eq!((s.bad_initiator, s.no_ni, s.immediates_received), (2, 1, 0));
}

#[test]
fn immediates_unconfirmed_when_their_peer_fails_are_counted_lost() {
    let mut net = Net::new(3, MATCHING_LOGICAL);
    for _ in 0..3 {
        net.e[0]
            .send_immediate(net.ni[0], ProcessId::Rank(1), b"a", false)
            .unwrap();
    }
    net.e[0]
        .send_immediate(net.ni[0], ProcessId::Rank(2), b"b", false)
        .unwrap();
    net.e[0].handle_peer_failed(phys(1));
    assert_eq!(
        net.e[0].take_lost_immediates(),
        vec![LostImmediates {
            peer: phys(1),
            count: 3
        }]
    );
    assert!(net.e[0].take_lost_immediates().is_empty());
    assert_eq!(net.e[0].stats().immediates_lost, 3);
    // The one to rank 2 is still outstanding; the failed peer's messages were dropped.
    assert_eq!(net.e[0].immediates_unconfirmed(), 1);
    assert_eq!(net.e[0].poll_outgoing().map(|(to, _)| to), Some(phys(2)));
    assert!(net.e[0].poll_outgoing().is_none());
    // A peer with nothing unconfirmed fails without a loss.
    net.e[0].handle_peer_failed(phys(1));
    assert!(net.e[0].take_lost_immediates().is_empty());
}

#[test]
fn an_immediate_to_this_interface_is_queued_at_once() {
    let mut net = Net::new(2, MATCHING_LOGICAL);
    let ni = net.ni[1];
    assert!(net.e[1]
        .send_immediate(ni, ProcessId::Rank(1), b"me", false)
        .unwrap());
    assert!(net.e[1].poll_outgoing().is_none());
    assert_eq!(net.e[1].immediates_unconfirmed(), 0);
    assert_eq!(taken(&mut net.e[1], ni), vec![(1, b"me".to_vec())]);
}

#[test]
fn sends_to_this_interface_stop_at_a_full_backlog_unless_forced() {
    let mut net = Net::new(1, MATCHING_LOGICAL);
    let ni = net.ni[0];
    for _ in 0..IMMEDIATE_BACKLOG_MAX {
        assert!(net.e[0]
            .send_immediate(ni, ProcessId::Rank(0), b"s", false)
            .unwrap());
    }
    assert!(!net.e[0]
        .send_immediate(ni, ProcessId::Rank(0), b"s", false)
        .unwrap());
    assert!(net.e[0]
        .send_immediate(ni, ProcessId::Rank(0), b"s", true)
        .unwrap());
    let mut out = ImmediateBatch::default();
    net.e[0].take_immediates(ni, &mut out, 2);
    assert!(net.e[0]
        .send_immediate(ni, ProcessId::Rank(0), b"s", false)
        .unwrap());
    assert_eq!(net.e[0].immediates_waiting(), IMMEDIATE_BACKLOG_MAX);
}

#[test]
fn bad_immediates_are_refused_at_the_sender() {
    let mut net = Net::new(2, MATCHING_LOGICAL);
    let big = [0u8; MAX_IMMEDIATE + 1];
    let too_big = net.e[0].send_immediate(net.ni[0], ProcessId::Rank(1), &big, false);
    assert!(
        matches!(&too_big, Err(e) if e.to_string().contains("585 bytes exceed the 584")),
        "{too_big:?}"
    );
    let outside = net.e[0].send_immediate(net.ni[0], ProcessId::Rank(5), b"x", false);
    assert!(outside.is_err(), "{outside:?}");
    let mut phys_net = Net::new(2, MATCHING_PHYS);
    let on_phys =
        phys_net.e[0].send_immediate(phys_net.ni[0], ProcessId::Phys(phys(1)), b"x", false);
    assert!(
        matches!(&on_phys, Err(e) if e.to_string().contains("logical NI")),
        "{on_phys:?}"
    );
    assert!(net.e[0].poll_outgoing().is_none());
    assert!(phys_net.e[0].poll_outgoing().is_none());
}
