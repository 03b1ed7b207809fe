//! Two-process ping-pong of the native Portals engine over real UDP, next to what plain UDP
//! sockets achieve on the same machine in the same run.
//!
//! `cargo run --release -p rgasnet-portals --example pingpong` starts this program, which
//! re-executes itself with `--server` as the second process. The server prints the addresses
//! of its sockets on stdout and then obeys one command per line on stdin (run the server half
//! of a measurement, answer `done`); the client runs the other half. Each repetition measures,
//! in this order: the raw UDP 8-byte ping-pong, the engine's 8-byte put + ACK round trip, the
//! engine's 1 MiB put bandwidth (counted acks, several puts in flight), and the raw UDP stream
//! of 1 MiB messages in datagrams of the engine's size. Medians over repetitions are printed in
//! the `raw:` line format of `BENCH-FORMAT.md`, then the two ratios against their targets.
//!
//! Both sides make progress only inside their own waits (the server waits on its EQ or CT),
//! as the engine is designed to be used. Every wait is bounded, and the server is killed when
//! the client exits, so the example cannot hang.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;

use rgasnet_portals::baseline::{self, StreamParams};
use rgasnet_portals::engine::RemoteAddr;
use rgasnet_portals::engine::{CtHandle, EqGet, EqHandle, LeSpec, MdHandle, MdSpec, PutArgs};
use rgasnet_portals::interface::{Interface, InterfaceConfig, Ni};
use rgasnet_portals::transport::TransportConfig;
use rgasnet_portals::types::{
    AckReq, Addressing, EventKind, ListKind, Matching, MdOptions, MeOptions, NiFail, NiKind,
    PhysId, ProcessId, PtOptions, UID_ANY,
};
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint, DEFAULT_SPIN};
use rgasnet_portals::Region;

/// Portal index of the 8-byte ping-pong target (an LE with full events).
const PT_PING: u32 = 0;
/// Portal index of the 1 MiB bandwidth target (an LE counted on a CT, no events).
const PT_BW: u32 = 1;
const BIG: usize = 1 << 20;
const SMALL: usize = 8;
/// Bound on any single wait of either process.
const WAIT: Duration = Duration::from_secs(20);
const KIND: NiKind = NiKind {
    matching: Matching::NoMatching,
    addressing: Addressing::Physical,
};

/// Engine vs raw UDP: 8-byte put+ACK round trip and 1 MiB put bandwidth, two processes.
#[derive(Parser, Debug, Clone)]
#[command(name = "pingpong")]
struct Opts {
    /// Round trips per repetition (raw UDP and engine each; plus 10 % warm-up).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    iters: u32,
    /// 1 MiB messages per bandwidth repetition (raw UDP and engine each).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(2..=1_000_000))]
    count: u32,
    /// Repetitions; every figure is the median over them.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,
    /// 1 MiB puts the engine keeps in flight.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    in_flight: u32,
    /// Internal: run as the server process.
    #[arg(long, hide = true)]
    server: bool,
    /// Internal: the job key both processes use.
    #[arg(long, hide = true, default_value_t = 0)]
    job_key: u64,
}

fn main() -> Result<()> {
    let opts = Opts::parse();
    if opts.server {
        server(&opts)
    } else {
        client(opts)
    }
}

fn open_interface(job_key: u64) -> Result<(Interface, Ni)> {
    let udp = UdpConfig::from_env().context("choosing the UDP address")?;
    let ep = UdpEndpoint::bind(&udp).context("binding the engine's socket")?;
    let cfg = InterfaceConfig {
        transport: TransportConfig {
            job_key,
            ..TransportConfig::default()
        },
        uid: 0,
        // The same waiting strategy as the raw baselines (see `udp::DEFAULT_SPIN`).
        spin: DEFAULT_SPIN,
        background_progress: Some(rgasnet_portals::interface::DEFAULT_BACKGROUND_PROGRESS),
    };
    let iface = Interface::new(cfg, Box::new(ep)).context("opening the interface")?;
    let ni = iface.ni_init(KIND, None).context("opening the NI")?;
    Ok((iface, ni))
}

fn bind_raw() -> Result<UdpEndpoint> {
    let udp = UdpConfig::from_env().context("choosing the UDP address")?;
    UdpEndpoint::bind(&udp).context("binding a raw socket")
}

fn le(region: &Region, ct: Option<CtHandle>, options: MeOptions) -> LeSpec {
    LeSpec {
        region: region.clone(),
        offset: 0,
        length: region.len() as u64,
        ct,
        uid: UID_ANY,
        options: options | MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE,
    }
}

// ------------------------------------------------------------------------------- server

/// The server's state: its sockets, and the engine's targets.
struct Server {
    ping: UdpEndpoint,
    stream: UdpEndpoint,
    ni: Ni,
    eq: EqHandle,
    ct: CtHandle,
    /// Puts counted on `ct` so far.
    counted: u64,
}

fn server(opts: &Opts) -> Result<()> {
    let (iface, ni) = open_interface(opts.job_key)?;
    let eq = ni.eq_alloc(4096)?;
    ni.pt_alloc(PtOptions::empty(), Some(eq), PT_PING)?;
    ni.le_append(
        PT_PING,
        le(&Region::new(SMALL), None, MeOptions::empty()),
        ListKind::Priority,
        1,
    )?;
    let ct = ni.ct_alloc()?;
    ni.pt_alloc(PtOptions::empty(), None, PT_BW)?;
    let quiet = MeOptions::EVENT_CT_COMM | MeOptions::EVENT_COMM_DISABLE;
    ni.le_append(
        PT_BW,
        le(&Region::new(BIG), Some(ct), quiet),
        ListKind::Priority,
        2,
    )?;
    let mut s = Server {
        ping: bind_raw()?,
        stream: bind_raw()?,
        ni,
        eq,
        ct,
        counted: 0,
    };
    let mut out = std::io::stdout().lock();
    let ids = [s.ping.local_id(), s.stream.local_id(), iface.phys_id()];
    let mut line = String::from("ready");
    for id in ids {
        line.push_str(&format!(" {} {}", id.nid, id.pid));
    }
    writeln!(out, "{line}")?;
    out.flush()?;
    // Commands until the client closes stdin (or dies, which closes it too).
    for cmd in std::io::stdin().lock().lines() {
        let cmd = cmd.context("reading a command")?;
        let mut words = cmd.split_whitespace();
        let name = words.next().unwrap_or_default();
        let n: u64 = match words.next().map(str::parse) {
            Some(Ok(n)) => n,
            _ => bail!("bad command {cmd:?}: expected `<name> <count>`"),
        };
        match name {
            "raw-pingpong" => baseline::pingpong_server(
                &s.ping,
                SMALL,
                n as usize,
                baseline::Wait::blocking(baseline::DEFAULT_TIMEOUT),
            )?,
            "put-pingpong" => {
                for _ in 0..n {
                    match s.ni.eq_wait(s.eq, Some(WAIT))? {
                        EqGet::Event(ev)
                            if ev.kind == EventKind::Put && ev.ni_fail == NiFail::Ok => {}
                        other => bail!("put-pingpong server: unexpected {other:?}"),
                    }
                }
            }
            "put-bw" => {
                s.counted += n;
                let v = s.ni.ct_wait(s.ct, s.counted, Some(WAIT))?;
                ensure!(v.failure == 0, "put-bw server: {} failed puts", v.failure);
            }
            "raw-stream" => {
                let p = StreamParams::new(BIG, TransportConfig::default().max_datagram, n as usize);
                baseline::stream_receiver(&s.stream, &p)?;
            }
            _ => bail!("unknown command {cmd:?}"),
        }
        writeln!(out, "done")?;
        out.flush()?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------- client

/// The server process; killed when dropped so that no run leaves it behind.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Peer {
    fn spawn(job_key: u64) -> Result<Peer> {
        let exe = std::env::current_exe().context("locating this program")?;
        let mut child = Command::new(exe)
            .args(["--server", "--job-key", &job_key.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the server process")?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            bail!("the server process has no stdin/stdout pipes");
        };
        Ok(Peer {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    fn line(&mut self) -> Result<String> {
        let mut l = String::new();
        let n = self
            .stdout
            .read_line(&mut l)
            .context("reading from the server")?;
        ensure!(n > 0, "the server process exited (see its error above)");
        Ok(l.trim_end().to_string())
    }

    fn command(&mut self, name: &str, n: u64) -> Result<()> {
        writeln!(self.stdin, "{name} {n}").context("writing to the server")?;
        self.stdin.flush().context("writing to the server")
    }

    fn done(&mut self, what: &str) -> Result<()> {
        let l = self.line()?;
        ensure!(l == "done", "server answered {l:?} after {what}");
        Ok(())
    }
}

fn parse_ready(line: &str) -> Result<[PhysId; 3]> {
    let nums: Vec<u32> = line
        .strip_prefix("ready ")
        .with_context(|| format!("server said {line:?} instead of `ready ...`"))?
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("bad address in {line:?}"))?;
    ensure!(nums.len() == 6, "expected three addresses in {line:?}");
    let id = |i: usize| PhysId {
        nid: nums[2 * i],
        pid: nums[2 * i + 1],
    };
    Ok([id(0), id(1), id(2)])
}

/// Median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Bytes per second from completion stamps of `size`-byte messages, first to last (the same
/// method as the raw stream baseline, so the two compare).
fn rate(size: usize, stamps: &[Instant]) -> f64 {
    match (stamps.first(), stamps.last()) {
        (Some(a), Some(b)) if stamps.len() > 1 => {
            (stamps.len() - 1) as f64 * size as f64 / b.duration_since(*a).as_secs_f64().max(1e-9)
        }
        _ => f64::NAN,
    }
}

/// The engine's side of the client.
struct Engine {
    ni: Ni,
    server: PhysId,
    ping_md: MdHandle,
    eq: EqHandle,
    bw_md: MdHandle,
    ct: CtHandle,
}

impl Engine {
    fn new(ni: Ni, server: PhysId) -> Result<Engine> {
        let eq = ni.eq_alloc(64)?;
        let ping_md = ni.md_bind(MdSpec {
            region: Region::from_bytes(&[0x5a; SMALL]),
            offset: 0,
            length: SMALL as u64,
            options: MdOptions::EVENT_SEND_DISABLE,
            eq: Some(eq),
            ct: None,
        })?;
        let ct = ni.ct_alloc()?;
        let bw_md = ni.md_bind(MdSpec {
            region: Region::from_bytes(&vec![0xa5; BIG]),
            offset: 0,
            length: BIG as u64,
            options: MdOptions::EVENT_CT_ACK,
            eq: None,
            ct: Some(ct),
        })?;
        Ok(Engine {
            ni,
            server,
            ping_md,
            eq,
            bw_md,
            ct,
        })
    }

    fn put(&self, md: MdHandle, len: usize, pt: u32, ack: AckReq) -> Result<()> {
        self.ni.put(&PutArgs {
            md,
            local_offset: 0,
            length: len as u64,
            ack_req: ack,
            remote: RemoteAddr {
                target: ProcessId::Phys(self.server),
                pt_index: pt,
                match_bits: 0,
                remote_offset: 0,
            },
            user_ptr: 0,
            hdr_data: 0,
        })?;
        Ok(())
    }

    /// Round-trip times of `n` 8-byte puts, each waiting for its ACK.
    fn pingpong(&self, n: u32) -> Result<Vec<f64>> {
        let mut rtts = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let t = Instant::now();
            self.put(self.ping_md, SMALL, PT_PING, AckReq::Ack)?;
            match self.ni.eq_wait(self.eq, Some(WAIT))? {
                EqGet::Event(ev) if ev.kind == EventKind::Ack && ev.ni_fail == NiFail::Ok => {}
                other => bail!("put pingpong: unexpected {other:?}"),
            }
            rtts.push(t.elapsed().as_secs_f64());
        }
        Ok(rtts)
    }

    /// Bandwidth of `n` 1 MiB puts with counted acks, `in_flight` at a time.
    fn bandwidth(&self, n: u32, in_flight: u32) -> Result<f64> {
        let base = self.ni.ct_get(self.ct)?.success;
        let (n, in_flight) = (u64::from(n), u64::from(in_flight));
        let mut issued = 0;
        let mut stamps = Vec::with_capacity(n as usize);
        while issued < n.min(in_flight) {
            self.put(self.bw_md, BIG, PT_BW, AckReq::CtAck)?;
            issued += 1;
        }
        while (stamps.len() as u64) < n {
            let v = self
                .ni
                .ct_wait(self.ct, base + stamps.len() as u64 + 1, Some(WAIT))?;
            ensure!(v.failure == 0, "put bandwidth: {} puts failed", v.failure);
            let now = Instant::now();
            while (stamps.len() as u64) < v.success - base {
                stamps.push(now);
            }
            while issued < n && issued - (v.success - base) < in_flight {
                self.put(self.bw_md, BIG, PT_BW, AckReq::CtAck)?;
                issued += 1;
            }
        }
        Ok(rate(BIG, &stamps))
    }
}

fn client(opts: Opts) -> Result<()> {
    let job_key: u64 = rand::random::<u64>() | 1;
    let mut peer = Peer::spawn(job_key)?;
    let ready = peer.line()?;
    let [raw_ping, raw_stream, engine_server] = parse_ready(&ready)?;
    let raw = bind_raw()?;
    let (_iface, ni) = open_interface(job_key)?;
    let engine = Engine::new(ni, engine_server)?;
    let warm = (opts.iters / 10).max(1);
    let total = opts.iters + warm;
    let datagram = TransportConfig::default().max_datagram;

    let (mut raw_rtt, mut put_rtt, mut put_bw, mut raw_bw) = (vec![], vec![], vec![], vec![]);
    for rep in 0..opts.reps {
        peer.command("raw-pingpong", u64::from(total))?;
        let mut r: Vec<f64> = baseline::pingpong_client(
            &raw,
            raw_ping,
            SMALL,
            total as usize,
            baseline::Wait::blocking(baseline::DEFAULT_TIMEOUT),
        )?
        .iter()
        .skip(warm as usize)
        .map(Duration::as_secs_f64)
        .collect();
        peer.done("raw-pingpong")?;
        raw_rtt.push(median(&mut r));

        peer.command("put-pingpong", u64::from(total))?;
        let mut r = engine.pingpong(total)?.split_off(warm as usize);
        peer.done("put-pingpong")?;
        put_rtt.push(median(&mut r));

        peer.command("put-bw", u64::from(opts.count))?;
        put_bw.push(engine.bandwidth(opts.count, opts.in_flight)?);
        peer.done("put-bw")?;

        peer.command("raw-stream", u64::from(opts.count))?;
        let p = StreamParams::new(BIG, datagram, opts.count as usize);
        raw_bw.push(rate(BIG, &baseline::stream_sender(&raw, raw_stream, &p)?));
        peer.done("raw-stream")?;
        eprintln!(
            "# rep {rep}: raw rtt {:.2} us, put rtt {:.2} us, put bw {:.1} MB/s, raw stream {:.1} MB/s",
            raw_rtt[rep as usize] * 1e6,
            put_rtt[rep as usize] * 1e6,
            put_bw[rep as usize] / 1e6,
            raw_bw[rep as usize] / 1e6
        );
    }
    drop(peer);

    let (rr, pr) = (median(&mut raw_rtt) * 1e6, median(&mut put_rtt) * 1e6);
    let (pb, rb) = (median(&mut put_bw) / 1e6, median(&mut raw_bw) / 1e6);
    println!(
        "# rgasnet-portals pingpong: 2 processes, UDP, {} reps (medians), {} round trips, {} x 1 MiB, {} in flight, {} B datagrams",
        opts.reps, opts.iters, opts.count, opts.in_flight, datagram
    );
    println!("raw: udp pingpong 8 byte rtt {rr:.2} us");
    println!("engine: put+ack 8 byte rtt {pr:.2} us");
    println!("engine: put 1048576 byte {pb:.1} MB/s");
    println!("raw: udp stream 1048576 byte {rb:.1} MB/s");
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let (rtt_ratio, bw_ratio) = (pr / rr, pb / rb);
    println!(
        "ratio: put rtt / raw rtt {rtt_ratio:.3} (target <= 1.25: {})",
        verdict(rtt_ratio <= 1.25)
    );
    println!(
        "ratio: put bw / raw stream {bw_ratio:.3} (target >= 0.80: {})",
        verdict(bw_ratio >= 0.80)
    );
    Ok(())
}
