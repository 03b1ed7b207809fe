//! Silly-window avoidance (`SendState::window_too_narrow`), driven by hand-written acks: small
//! messages queued behind a nearly closed window wait until a quarter of it is free and then
//! leave together; large messages, and anything sent while nothing is in flight, never wait.

use super::send::{NARROW_WINDOW, NARROW_WINDOW_SMALL};
use super::*;

const KEY: u64 = 0x5117;
const WINDOW: usize = 16;
const LOCAL_INC: u64 = 7;
const PEER_INC: u64 = 9;

fn id(pid: u32) -> PhysId {
    PhysId {
        nid: 0x7f00_0001,
        pid,
    }
}

fn sender(t0: Instant) -> Transport {
    let c = TransportConfig {
        job_key: KEY,
        window: WINDOW,
        ..TransportConfig::default()
    };
    Transport::new(c, id(1), LOCAL_INC, t0).unwrap()
}

/// An ack from the peer saying that every frame below `cumulative` arrived.
fn ack(cumulative: u64) -> Vec<u8> {
    let mut dg = Vec::new();
    wire::write_header(
        &mut dg,
        &Header {
            job_key: KEY,
            src_incarnation: PEER_INC,
            dst_incarnation: LOCAL_INC,
        },
    );
    wire::write_ack(&mut dg, &wire::AckFrame::new(cumulative, cumulative - 1, 0));
    dg
}

/// Runs a transmit pass; returns the DATA frames of each datagram it produced.
fn transmit(t: &mut Transport, now: Instant) -> Vec<usize> {
    let mut out = Vec::new();
    let mut per_datagram = Vec::new();
    while t.poll_transmit(now, &mut out).is_some() {
        let dg = Datagram::parse(&out, KEY).unwrap();
        let frames = dg
            .frames()
            .filter(|f| matches!(f, Ok(Frame::Data(_))))
            .count();
        if frames > 0 {
            per_datagram.push(frames);
        }
    }
    per_datagram
}

#[test]
fn small_messages_wait_for_a_quarter_of_the_window_then_leave_together() {
    let t0 = Instant::now();
    let mut t = sender(t0);
    for i in 0..40u8 {
        t.send(t0, id(2), vec![i; 8]).unwrap();
    }
    // The first pass fills the window, all in one datagram.
    assert_eq!(transmit(&mut t, t0), vec![WINDOW]);
    let quarter = (WINDOW / NARROW_WINDOW) as u64;
    // Acks that free fewer than a quarter of the window send nothing: 24 messages wait.
    for freed in 1..quarter {
        t.handle_datagram(t0, id(2), &ack(freed));
        assert_eq!(transmit(&mut t, t0), Vec::<usize>::new(), "{freed} free");
    }
    // A quarter free: the waiting messages fill it, in one datagram.
    t.handle_datagram(t0, id(2), &ack(quarter));
    assert_eq!(transmit(&mut t, t0), vec![quarter as usize]);
    assert_eq!(t.stats().data_frames_sent, WINDOW as u64 + quarter);
    // Once everything is acknowledged, the rest goes as the window allows, and nothing is
    // left behind.
    let mut acked = quarter;
    let mut sent = WINDOW as u64 + quarter;
    while acked < 40 {
        acked = sent;
        t.handle_datagram(t0, id(2), &ack(acked));
        sent += transmit(&mut t, t0).iter().sum::<usize>() as u64;
    }
    assert_eq!(sent, 40);
    // The last ack, covering everything sent, was kept for the timer pass (see `settle`).
    assert!(t.poll_timeout().is_some_and(|d| d <= t0));
    t.handle_timeout(t0);
    assert!(t.all_acknowledged());
}

#[test]
fn large_messages_and_an_empty_window_never_wait() {
    let t0 = Instant::now();
    let mut t = sender(t0);
    // Nothing in flight: a lone small message leaves at once, however full the queue.
    t.send(t0, id(2), vec![1u8; 8]).unwrap();
    assert_eq!(transmit(&mut t, t0), vec![1]);
    t.handle_datagram(t0, id(2), &ack(1));
    assert_eq!(transmit(&mut t, t0), Vec::<usize>::new());
    // Large messages behind a nearly closed window: each freed slot is filled at once.
    for i in 0..40u8 {
        t.send(t0, id(2), vec![i; NARROW_WINDOW_SMALL]).unwrap();
    }
    let first: usize = transmit(&mut t, t0).iter().sum();
    assert_eq!(first, WINDOW);
    t.handle_datagram(t0, id(2), &ack(2));
    assert_eq!(transmit(&mut t, t0).iter().sum::<usize>(), 1);
}
