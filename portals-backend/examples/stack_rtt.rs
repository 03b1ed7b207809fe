//! The user-space cost of one 8-byte put + ACK round trip through two engine stacks wired back
//! to back in one thread (no sockets, no system calls): what the engine and the transport add
//! to a network round trip, measured without the kernel's noise. A profiler run on this
//! example sees only that path.
//!
//! With `kernel` as the third argument, every step (each side's turn) first sends and receives
//! one 100-byte datagram over a loopback UDP socket, as a real round trip's system calls run
//! between the stacks' steps, and the program also times those system calls alone: the
//! difference is what the stacks cost when the kernel's network path has run in between
//! (their code and data partly evicted from the core's caches), the figure a real ping-pong
//! pays.
//!
//! `cargo run --release -p rgasnet-portals --example stack_rtt [round trips] [ack|confirmed]
//! [kernel]`

use std::net::UdpSocket;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rgasnet_portals::engine::{
    CtHandle, Engine, EqGet, EqHandle, LeSpec, MdHandle, MdSpec, PutArgs, RemoteAddr,
};
use rgasnet_portals::stack::Stack;
use rgasnet_portals::transport::{random_incarnation, Transport, TransportConfig};
use rgasnet_portals::types::{
    AckReq, Addressing, EventKind, ListKind, Matching, MdOptions, MeOptions, NiKind, PhysId,
    ProcessId, PtOptions,
};
use rgasnet_portals::Region;

const PT: u32 = 0;
const UID: u32 = 7;

struct Side {
    stack: Stack,
    eq: EqHandle,
    md: MdHandle,
}

fn phys(i: u32) -> PhysId {
    PhysId {
        nid: 0x7f00_0001,
        pid: 5000 + i,
    }
}

fn side(i: u32) -> Result<Side> {
    let map = [phys(0), phys(1)];
    let me = map[i as usize];
    let cfg = TransportConfig {
        job_key: 0x1a2b,
        ..Default::default()
    };
    let transport = Transport::new(cfg, me, random_incarnation(), Instant::now())?;
    let mut e = Engine::new(me, UID, 10 + i);
    let kind = NiKind {
        matching: Matching::NoMatching,
        addressing: Addressing::Logical,
    };
    let (ni, _) = e.ni_init(kind, None)?;
    e.set_map(ni, &map)?;
    let eq = e.eq_alloc(ni, 1024)?;
    e.pt_alloc(ni, PtOptions::empty(), Some(eq), PT)?;
    let sink = Region::new(4096);
    e.le_append(
        ni,
        PT,
        LeSpec {
            region: sink.clone(),
            offset: 0,
            length: sink.len() as u64,
            ct: None,
            uid: UID,
            options: MeOptions::OP_PUT
                | MeOptions::EVENT_LINK_DISABLE
                | MeOptions::EVENT_SUCCESS_DISABLE,
        },
        ListKind::Priority,
        0,
    )?;
    let md = e.md_bind(
        ni,
        MdSpec {
            region: Region::new(4096),
            offset: 0,
            length: 4096,
            options: MdOptions::EVENT_SEND_DISABLE,
            eq: Some(eq),
            ct: None::<CtHandle>,
        },
    )?;
    Ok(Side {
        stack: Stack::new(e, transport),
        eq,
        md,
    })
}

/// A loopback UDP socket that sends itself a datagram and reads it back before each step
/// (the `kernel` mode), standing for the system calls of a real round trip.
struct Kernel(Option<UdpSocket>);

impl Kernel {
    fn step(&self) {
        if let Some(sock) = &self.0 {
            let mut buf = [0u8; 128];
            // The socket blocks, so the receive returns the datagram just sent. Errors only make
            // the step cheaper; the timing says so (the kernel-only figure).
            if sock.send(&buf[..100]).is_ok() {
                let _ = sock.recv(&mut buf);
            }
        }
    }
}

/// Moves every datagram `from` has ready to `to` (each side reading the clock once, as a
/// driver does per step).
fn carry(kernel: &Kernel, from: &mut Side, to: &mut Side, out: &mut Vec<u8>) {
    kernel.step();
    let now = Instant::now();
    // A driver whose wait goes on releases the acks that initiators wait on.
    from.stack.release_soon_acks(now);
    while let Some(_dest) = from.stack.poll_transmit(now, out) {
        to.stack.handle_datagram(now, from.stack.local(), out);
    }
    to.stack.pump(now);
}

fn main() -> Result<()> {
    // `confirmed` as the second argument: the put asks for a confirmed acknowledgement
    // (`AckReq::ConfirmedAck`: the transport's ack stands for the target's ACK message).
    let ack_req = match std::env::args().nth(2).as_deref() {
        None | Some("ack") => AckReq::Ack,
        Some("confirmed") => AckReq::ConfirmedAck,
        Some(other) => bail!("the second argument is `ack` or `confirmed`, not {other:?}"),
    };
    let trips: u64 = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .context("the argument is a number of round trips")?,
        None => 2_000_000,
    };
    let kernel = match std::env::args().nth(3).as_deref() {
        None => Kernel(None),
        Some("kernel") => {
            let sock = UdpSocket::bind("127.0.0.1:0").context("binding a loopback socket")?;
            sock.connect(sock.local_addr()?)
                .context("connecting the socket to itself")?;
            let kernel = Kernel(Some(sock));
            let start = Instant::now();
            for _ in 0..trips {
                kernel.step();
                kernel.step();
            }
            let per = start.elapsed().as_nanos() as f64 / trips as f64;
            println!("stack_rtt: the system calls alone, {per:.0} ns per round trip");
            kernel
        }
        Some(other) => bail!("the third argument is `kernel` or nothing, not {other:?}"),
    };
    let (mut client, mut server) = (side(0)?, side(1)?);
    let mut out = Vec::with_capacity(65_536);
    let args = PutArgs {
        md: client.md,
        local_offset: 0,
        length: 8,
        ack_req,
        remote: RemoteAddr {
            target: ProcessId::Rank(1),
            pt_index: PT,
            match_bits: 0,
            remote_offset: 64,
        },
        user_ptr: 0,
        hdr_data: 0,
    };
    let start = Instant::now();
    for i in 0..trips {
        client.stack.engine.put(&PutArgs {
            user_ptr: i,
            ..args
        })?;
        client.stack.pump(Instant::now());
        carry(&kernel, &mut client, &mut server, &mut out);
        carry(&kernel, &mut server, &mut client, &mut out);
        match client.stack.engine.eq_get(client.eq)? {
            EqGet::Event(ev) if ev.kind == EventKind::Ack && ev.user_ptr == i => {}
            other => bail!("round trip {i}: expected its ACK, got {other:?}"),
        }
        let _ = server.stack.engine.eq_get(server.eq)?;
    }
    let per = start.elapsed().as_nanos() as f64 / trips as f64;
    let how = if kernel.0.is_some() {
        "both sides, with the system calls between steps"
    } else {
        "both sides, no sockets"
    };
    println!(
        "stack_rtt: {trips} put+ACK round trips of 8 bytes ({ack_req:?}), {per:.0} ns each ({how})"
    );
    Ok(())
}
