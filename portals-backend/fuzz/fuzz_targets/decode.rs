//! Fuzzes the datagram decoder, and the transport's handling of whatever decodes.
#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use rgasnet_portals::transport::{Transport, TransportConfig};
use rgasnet_portals::wire::{Datagram, Frame};
use rgasnet_portals::PhysId;

const KEY: u64 = 0x0102_0304_0506_0708;

fuzz_target!(|data: &[u8]| {
    let Ok(dg) = Datagram::parse(data, KEY) else {
        return;
    };
    for frame in dg.frames() {
        // parse() validated every frame: an error here is a decoder bug.
        match frame.expect("validated frame failed to decode") {
            Frame::Data(d) => assert!(d.offset as u64 + d.payload.len() as u64 <= d.total as u64),
            Frame::Ack(a) => assert!(a.ranges().iter().all(|r| r.start < r.end)),
        }
    }
    // Whatever decodes must also be safe to hand to a transport.
    let now = Instant::now();
    let cfg = TransportConfig {
        job_key: KEY,
        ..TransportConfig::default()
    };
    let local = PhysId {
        nid: 0x7f00_0001,
        pid: 1,
    };
    let from = PhysId {
        nid: 0x7f00_0001,
        pid: 2,
    };
    let Ok(mut t) = Transport::new(cfg, local, 1, now) else {
        return;
    };
    t.handle_datagram(now, from, data);
    t.handle_datagram(now, from, data);
    let mut out = Vec::new();
    while t.poll_transmit(now, &mut out).is_some() {}
    while t.poll_event().is_some() {}
    t.handle_timeout(now + std::time::Duration::from_secs(60));
});
