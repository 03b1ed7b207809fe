//! Configuration from the environment: every variable rgasnet reads is parsed here, once, into
//! a [`Config`], with a typed error naming the variable and the bad value (`DESIGN.md` §8).
//!
//! GASNet's names are used where GASNet has one, so existing job scripts keep working; rgasnet's
//! own settings start with `RGASNET_`. `GASNET_VERBOSEENV=1` prints every setting and where its
//! value came from.

use std::collections::HashMap;
use std::fmt;

/// `GASNET_AM_BUFFER_SIZE`: bytes per AM receive block (default 1 MiB).
pub const AM_BUFFER_SIZE: &str = "GASNET_AM_BUFFER_SIZE";
/// `GASNET_AM_NUM_ENTRIES`: number of AM receive blocks (default 16).
pub const AM_NUM_ENTRIES: &str = "GASNET_AM_NUM_ENTRIES";
/// `GASNET_AM_EVENT_QUEUE_LENGTH`: length of the AM event queue (default 8192); the queue of
/// the AM sends' acknowledgements takes at least what may be in flight (a few thousand).
pub const AM_EVENT_QUEUE_LENGTH: &str = "GASNET_AM_EVENT_QUEUE_LENGTH";
/// `GASNET_EXTENDED_EVENT_QUEUE_LENGTH`: bound on outstanding explicit put/get (default 8192).
pub const EXTENDED_EVENT_QUEUE_LENGTH: &str = "GASNET_EXTENDED_EVENT_QUEUE_LENGTH";
/// `GASNET_MAX_SEGSIZE`: cap on a segment (bytes with K/M/G/T suffix, or `F/H` = fraction F of
/// this host's physical memory; default `0.5/H`).
pub const MAX_SEGSIZE: &str = "GASNET_MAX_SEGSIZE";
/// `GASNET_SUPERNODE_MAXSIZE`: cap on ranks sharing memory (0 = no cap, 1 = no PSHM).
pub const SUPERNODE_MAXSIZE: &str = "GASNET_SUPERNODE_MAXSIZE";
/// `GASNET_VERBOSEENV`: print every setting and its source at start-up.
pub const VERBOSEENV: &str = "GASNET_VERBOSEENV";
/// `RGASNET_PSHM`: 0 turns the shared-memory path off.
pub const PSHM: &str = "RGASNET_PSHM";
/// `RGASNET_PSHM_BARRIER`: the shared-memory node barrier, `auto` (default: dissemination, or
/// the shared counter on a host with more ranks than CPUs), `counter` or `dissemination`. The
/// lowest rank of each host decides for the host.
pub const PSHM_BARRIER: &str = "RGASNET_PSHM_BARRIER";
/// `RGASNET_PSHM_BARRIER_RADIX`: the dissemination barrier's radix, 2 to 8 (each rank writes to
/// radix - 1 others per round; 16 ranks take 4 rounds at 2, 2 at 4). The lowest rank of each
/// host decides for the host.
pub const PSHM_BARRIER_RADIX: &str = "RGASNET_PSHM_BARRIER_RADIX";
/// `RGASNET_PORTALS`: which Portals engine, `native` (default) or `ref`.
pub const PORTALS: &str = "RGASNET_PORTALS";
/// `RGASNET_PORTALS_MAX_INFLIGHT`: over a Portals library (`RGASNET_PORTALS=ref`), the active
/// messages (and pieces of Long payloads) a rank keeps unacknowledged at once, 1 to 65536
/// (default 8). A send past the bound polls until one is acknowledged; a reply sent from a
/// handler, which cannot wait, is queued and leaves when one is. Sandia's reference
/// implementation never sends a UDP datagram again: one the kernel drops because the
/// receiving socket's buffer is full is lost, with its put or acknowledgement
/// (`tests/src/bin/ref_flood.rs` shows it), so what a rank has in flight must fit the
/// receivers' buffers. The native engine has no such bound.
pub const PORTALS_MAX_INFLIGHT: &str = "RGASNET_PORTALS_MAX_INFLIGHT";
/// `RGASNET_PORTALS_MAX_INFLIGHT_BYTES`: over a Portals library, the bytes of active-message
/// puts a rank keeps unacknowledged at once (default 16K; one larger message goes alone), as
/// [`PORTALS_MAX_INFLIGHT`] bounds their number. Over Sandia's reference implementation, two
/// ranks lose puts with 12 of 7,000 bytes in flight each way and not with 8 (a socket buffer
/// of `net.core.rmem_default`, 208 KiB); 16K leaves room for three senders to one rank.
pub const PORTALS_MAX_INFLIGHT_BYTES: &str = "RGASNET_PORTALS_MAX_INFLIGHT_BYTES";
/// `RGASNET_PEER_TIMEOUT`: seconds a silent peer is waited for before its operations fail
/// (default 30).
pub const PEER_TIMEOUT: &str = "RGASNET_PEER_TIMEOUT";
/// `RGASNET_STALL_WARNING`: seconds an active-message send may wait for room (the target's
/// flow control, or a full shared-memory queue), or a barrier for a late rank, before rgasnet
/// says so once on standard error, naming the rank waited for; 0 never warns (default 10). The
/// wait goes on: a target that is alive but does not poll holds its senders, and a rank that
/// has not reached a barrier every other, as in GASNet.
pub const STALL_WARNING: &str = "RGASNET_STALL_WARNING";
/// `RGASNET_IFACE`: interface name or IPv4 address the network engine binds (default loopback
/// for single-host jobs). `PTL_IFACE_NAME` is honoured when this is unset.
pub const IFACE: &str = "RGASNET_IFACE";
/// `RGASNET_WAIT_POLL_US`: microseconds a waiting call keeps polling after the last arrival
/// before it sleeps in the kernel, or `auto` (the default, 1000; see [`WaitPoll`]).
pub const WAIT_POLL_US: &str = "RGASNET_WAIT_POLL_US";
/// `RGASNET_MTU`: the link MTU the network engine sizes its datagrams for, instead of the
/// bound interface's (a tunnel's smaller path MTU; or a small MTU on loopback to exercise the
/// segmented path).
pub const MTU: &str = rgasnet_portals::udp::ENV_MTU;
/// `PTL_IFACE_NAME`: the Portals reference implementation's name for [`IFACE`].
pub const PTL_IFACE_NAME: &str = "PTL_IFACE_NAME";

/// A variable with a value rgasnet cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?} is invalid: {reason}")]
pub struct ConfigError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// Why it is refused and what is accepted.
    pub reason: String,
}

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The built-in default.
    Default,
    /// The environment.
    Env,
}

/// Which Portals engine to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortalsEngine {
    /// rgasnet's pure-Rust engine over UDP.
    Native,
    /// The Sandia reference implementation (needs the `ref-impl` build).
    Reference,
}

/// How long a waiting call polls before it sleeps in the kernel ([`WAIT_POLL_US`]).
///
/// On a host with a CPU for every rank, a wait spins for its first 20 µs, which covers a
/// loopback round trip, then polls on, yielding the CPU before each round, for the rest of
/// the budget, and then sleeps until something arrives. Waking a sleeping process costs tens
/// of microseconds on a virtual machine: without the budget, the rare answer that comes late
/// weighs on every average (a put's 99th percentile went from 60–100 µs to 12–20 µs with
/// 1 ms on this project's 2-vCPU VM).
///
/// On a host with more ranks than CPUs, a wait does not spin at all: it yields the CPU
/// between polls from the start, network and shared memory alike, so that the ranks it waits
/// for run (a spin would hold the CPU until the scheduler's slice ends, a sleep would cost a
/// wake-up per message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPoll {
    /// A budget of [`WaitPoll::AUTO_US`].
    Auto,
    /// This many microseconds.
    Micros(u32),
}

/// How this rank's waits poll ([`WaitPoll::polling`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Polling {
    /// Spinning (no yield) at the start of a wait.
    pub spin: std::time::Duration,
    /// Polling in all, from the last arrival, before the wait sleeps.
    pub budget: std::time::Duration,
    /// The host has more ranks than CPUs (waits yield from the start).
    pub crowded: bool,
}

impl WaitPoll {
    /// The `auto` budget, in µs.
    pub const AUTO_US: u32 = 1000;
    /// The spin at the start of a wait on a host with a CPU for every rank, in µs.
    pub const SPIN_US: u32 = 20;

    /// How waits poll on a host running `host_ranks` ranks on `cpus` CPUs.
    pub fn polling(self, host_ranks: usize, cpus: usize) -> Polling {
        let us = match self {
            WaitPoll::Micros(us) => us,
            WaitPoll::Auto => WaitPoll::AUTO_US,
        };
        let crowded = host_ranks > cpus;
        let spin = if crowded {
            0
        } else {
            us.min(WaitPoll::SPIN_US)
        };
        Polling {
            spin: std::time::Duration::from_micros(u64::from(spin)),
            budget: std::time::Duration::from_micros(u64::from(us)),
            crowded,
        }
    }
}

impl fmt::Display for WaitPoll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitPoll::Auto => f.write_str("auto"),
            WaitPoll::Micros(us) => write!(f, "{us}"),
        }
    }
}

/// The link MTU setting: `None` for the bound interface's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mtu(pub Option<usize>);

impl fmt::Display for Mtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(mtu) => write!(f, "{mtu}"),
            None => write!(f, "(the interface's)"),
        }
    }
}

/// Every setting, parsed and checked.
#[derive(Debug, Clone)]
pub struct Config {
    /// Bytes per AM receive block.
    pub am_buffer_size: usize,
    /// Number of AM receive blocks.
    pub am_num_entries: usize,
    /// AM event queue length.
    pub am_event_queue_length: usize,
    /// Bound on outstanding explicit extended-API operations.
    pub extended_event_queue_length: usize,
    /// Largest segment a rank may attach, in bytes.
    pub max_segsize: u64,
    /// Cap on supernode size (0 = none).
    pub supernode_maxsize: u32,
    /// Whether the shared-memory path may be used.
    pub pshm: bool,
    /// The shared-memory node barrier ([`PSHM_BARRIER`]).
    pub pshm_barrier: rgasnet_pshm::BarrierKind,
    /// The dissemination barrier's radix ([`PSHM_BARRIER_RADIX`]).
    pub pshm_barrier_radix: u32,
    /// Print settings at start-up.
    pub verbose_env: bool,
    /// Which Portals engine.
    pub portals: PortalsEngine,
    /// Active messages kept unacknowledged at once over a Portals library
    /// ([`PORTALS_MAX_INFLIGHT`]).
    pub portals_max_inflight: usize,
    /// Bytes of active messages kept unacknowledged at once over a Portals library
    /// ([`PORTALS_MAX_INFLIGHT_BYTES`]).
    pub portals_max_inflight_bytes: usize,
    /// Seconds before a silent peer's operations fail.
    pub peer_timeout_secs: u64,
    /// Seconds a send waits for room before a warning (0: never).
    pub stall_warning_secs: u64,
    /// Interface name or address to bind, if set.
    pub iface: Option<String>,
    /// How long waits poll before they sleep.
    pub wait_poll: WaitPoll,
    /// The link MTU to size datagrams for ([`MTU`]).
    pub mtu: Mtu,
    report: Vec<(&'static str, String, Source)>,
}

/// Where variables are read from: the process environment, or a map in tests.
pub trait EnvSource {
    /// The value of `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl EnvSource for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

struct Reader<'a> {
    env: &'a dyn EnvSource,
    report: Vec<(&'static str, String, Source)>,
}

impl Reader<'_> {
    fn raw(&self, var: &'static str) -> Option<String> {
        self.env
            .var(var)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    fn get<T: fmt::Display>(
        &mut self,
        var: &'static str,
        default: T,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        match self.raw(var) {
            None => {
                self.report
                    .push((var, default.to_string(), Source::Default));
                Ok(default)
            }
            Some(v) => {
                let parsed = parse(&v).map_err(|reason| ConfigError {
                    var,
                    value: v.clone(),
                    reason,
                })?;
                self.report.push((var, parsed.to_string(), Source::Env));
                Ok(parsed)
            }
        }
    }
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_source(&ProcessEnv)
    }

    /// Reads any [`EnvSource`].
    pub fn from_source(env: &dyn EnvSource) -> Result<Config, ConfigError> {
        let mut r = Reader {
            env,
            report: Vec::new(),
        };
        let am_buffer_size = r.get(AM_BUFFER_SIZE, 1usize << 20, |v| {
            let n = parse_size(v)?;
            let n = usize::try_from(n).map_err(|_| "too large for this platform".to_string())?;
            if n < 128 * 1024 {
                return Err("must be at least 128K so that a maximal Medium AM fits".into());
            }
            Ok(n)
        })?;
        let am_num_entries = r.get(AM_NUM_ENTRIES, 16usize, |v| parse_count(v, 2, 1 << 16))?;
        let am_event_queue_length = r.get(AM_EVENT_QUEUE_LENGTH, 8192usize, |v| {
            parse_count(v, 64, 1 << 24)
        })?;
        let extended_event_queue_length = r.get(EXTENDED_EVENT_QUEUE_LENGTH, 8192usize, |v| {
            parse_count(v, 16, 1 << 24)
        })?;
        let phys = physical_memory().unwrap_or(1 << 32);
        let max_segsize = r.get(MAX_SEGSIZE, phys / 2, |v| parse_segsize(v, phys))?;
        let supernode_maxsize = r.get(SUPERNODE_MAXSIZE, 0u32, |v| {
            Ok(parse_count(v, 0, 1 << 20)? as u32)
        })?;
        let pshm = r.get(PSHM, true, parse_bool)?;
        let pshm_barrier = r.get(PSHM_BARRIER, rgasnet_pshm::BarrierKind::Auto, |v| {
            rgasnet_pshm::BarrierKind::parse(v)
                .ok_or_else(|| "expected `auto`, `counter` or `dissemination`".into())
        })?;
        let pshm_barrier_radix = r.get(
            PSHM_BARRIER_RADIX,
            rgasnet_pshm::DEFAULT_BARRIER_RADIX,
            |v| Ok(parse_count(v, 2, rgasnet_pshm::MAX_BARRIER_RADIX as usize)? as u32),
        )?;
        let verbose_env = r.get(VERBOSEENV, false, parse_bool)?;
        let portals = r.get(PORTALS, PortalsEngine::Native, |v| {
            match v.to_ascii_lowercase().as_str() {
                "native" => Ok(PortalsEngine::Native),
                "ref" | "reference" => Ok(PortalsEngine::Reference),
                _ => Err("expected `native` or `ref`".into()),
            }
        })?;
        let portals_max_inflight =
            r.get(PORTALS_MAX_INFLIGHT, 8usize, |v| parse_count(v, 1, 1 << 16))?;
        let portals_max_inflight_bytes = r.get(PORTALS_MAX_INFLIGHT_BYTES, 16usize << 10, |v| {
            let n = parse_size(v)?;
            if !(1..=1 << 30).contains(&n) {
                return Err("must be from 1 byte to 1G".into());
            }
            usize::try_from(n).map_err(|_| "too large for this platform".to_string())
        })?;
        let peer_timeout_secs = r.get(PEER_TIMEOUT, 30u64, |v| {
            Ok(parse_count(v, 1, 86_400)? as u64)
        })?;
        let stall_warning_secs = r.get(STALL_WARNING, 10u64, |v| {
            Ok(parse_count(v, 0, 86_400)? as u64)
        })?;
        let iface = match r.raw(IFACE).or_else(|| r.raw(PTL_IFACE_NAME)) {
            Some(v) => {
                let var = if r.raw(IFACE).is_some() {
                    IFACE
                } else {
                    PTL_IFACE_NAME
                };
                r.report.push((var, v.clone(), Source::Env));
                Some(v)
            }
            None => {
                r.report
                    .push((IFACE, "(loopback for one host)".into(), Source::Default));
                None
            }
        };
        let wait_poll = r.get(WAIT_POLL_US, WaitPoll::Auto, |v| {
            if v.eq_ignore_ascii_case("auto") {
                return Ok(WaitPoll::Auto);
            }
            // At most 10 s: longer would be a process that never sleeps (the interface cuts
            // it there too).
            let us = parse_count(v, 0, 10_000_000)
                .map_err(|e| format!("{e} (microseconds), or `auto`"))?;
            Ok(WaitPoll::Micros(us as u32))
        })?;
        let mtu = r.get(MTU, Mtu(None), |v| {
            rgasnet_portals::udp::parse_mtu(Some(v))
                .map(Mtu)
                .map_err(|_| {
                    format!(
                        "expected the link MTU in bytes, {} to 65536",
                        rgasnet_portals::udp::MIN_MTU
                    )
                })
        })?;
        Ok(Config {
            am_buffer_size,
            am_num_entries,
            am_event_queue_length,
            extended_event_queue_length,
            max_segsize,
            supernode_maxsize,
            pshm: pshm && supernode_maxsize != 1,
            pshm_barrier,
            pshm_barrier_radix,
            verbose_env,
            portals,
            portals_max_inflight,
            portals_max_inflight_bytes,
            peer_timeout_secs,
            stall_warning_secs,
            iface,
            wait_poll,
            mtu,
            report: r.report,
        })
    }

    /// Every setting with its value and source, one line each (what `GASNET_VERBOSEENV=1` prints).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (var, value, source) in &self.report {
            let src = match source {
                Source::Default => "(default)",
                Source::Env => "(environment)",
            };
            s.push_str(&format!("ENV parameter: {var:<36} = {value:<20} {src}\n"));
        }
        s
    }
}

impl fmt::Display for PortalsEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PortalsEngine::Native => "native",
            PortalsEngine::Reference => "ref",
        })
    }
}

/// Parses GASNet's boolean spellings.
fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "y" | "yes" | "true" | "on" => Ok(true),
        "0" | "n" | "no" | "false" | "off" => Ok(false),
        _ => Err("expected 1/0, yes/no, true/false or on/off".into()),
    }
}

fn parse_count(v: &str, min: usize, max: usize) -> Result<usize, String> {
    let n: usize = v
        .parse()
        .map_err(|_| format!("expected a whole number from {min} to {max}"))?;
    if n < min || n > max {
        return Err(format!("must be from {min} to {max}"));
    }
    Ok(n)
}

/// Parses a byte size: a number (decimals allowed) with an optional K/M/G/T suffix (powers of
/// 1024, as GASNet reads them) and an optional trailing `B`.
pub fn parse_size(v: &str) -> Result<u64, String> {
    const HELP: &str = "expected a size such as 65536, 512K, 64MB or 1.5G";
    let s = v.trim().to_ascii_uppercase();
    let s = s.strip_suffix('B').unwrap_or(&s);
    let (num, mult) = match s.chars().last() {
        Some('K') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M') => (&s[..s.len() - 1], 1u64 << 20),
        Some('G') => (&s[..s.len() - 1], 1u64 << 30),
        Some('T') => (&s[..s.len() - 1], 1u64 << 40),
        _ => (s, 1),
    };
    let num = num.trim();
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(mult)
            .ok_or_else(|| "size overflows".to_string());
    }
    let f: f64 = num.parse().map_err(|_| HELP.to_string())?;
    if !f.is_finite() || f < 0.0 || f * mult as f64 >= u64::MAX as f64 {
        return Err(HELP.into());
    }
    Ok((f * mult as f64) as u64)
}

fn parse_segsize(v: &str, phys: u64) -> Result<u64, String> {
    let n = if let Some(frac) = v.trim().strip_suffix("/H").or(v.trim().strip_suffix("/h")) {
        let f: f64 = frac
            .trim()
            .parse()
            .map_err(|_| "expected a fraction of host memory such as 0.5/H".to_string())?;
        if !(f > 0.0 && f <= 1.0) {
            return Err("the fraction of host memory must be in (0, 1]".into());
        }
        (f * phys as f64) as u64
    } else {
        parse_size(v)?
    };
    if n == 0 {
        return Err("must be larger than 0".into());
    }
    Ok(n)
}

/// Physical memory of this host from `/proc/meminfo`, if readable.
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults() {
        let c = Config::from_source(&env(&[])).unwrap();
        assert_eq!(c.am_buffer_size, 1 << 20);
        assert_eq!(c.am_num_entries, 16);
        assert_eq!(c.am_event_queue_length, 8192);
        assert_eq!(c.extended_event_queue_length, 8192);
        assert!(c.pshm);
        assert_eq!(c.portals, PortalsEngine::Native);
        assert_eq!(c.peer_timeout_secs, 30);
        assert_eq!(c.stall_warning_secs, 10);
        assert!(c.describe().contains("GASNET_AM_NUM_ENTRIES"));
        assert!(c.describe().contains("(default)"));
    }

    #[test]
    fn values_and_sources() {
        let c = Config::from_source(&env(&[
            (AM_BUFFER_SIZE, "131072"),
            (AM_NUM_ENTRIES, "2"),
            (MAX_SEGSIZE, "64MB"),
            (SUPERNODE_MAXSIZE, "1"),
            (PORTALS, "ref"),
            (PTL_IFACE_NAME, "lo"),
        ]))
        .unwrap();
        assert_eq!(c.am_buffer_size, 131_072);
        assert_eq!(c.am_num_entries, 2);
        assert_eq!(c.max_segsize, 64 << 20);
        assert!(!c.pshm, "GASNET_SUPERNODE_MAXSIZE=1 turns PSHM off");
        assert_eq!(c.portals, PortalsEngine::Reference);
        assert_eq!(c.iface.as_deref(), Some("lo"));
        let d = c.describe();
        assert!(d.contains("GASNET_AM_NUM_ENTRIES") && d.contains("(environment)"));
    }

    #[test]
    fn wait_polling() {
        use std::time::Duration;
        let us = Duration::from_micros;
        let c = Config::from_source(&env(&[])).unwrap();
        assert_eq!(c.wait_poll, WaitPoll::Auto);
        assert_eq!(
            c.wait_poll.polling(2, 2),
            Polling {
                spin: us(20),
                budget: us(1000),
                crowded: false
            }
        );
        assert_eq!(
            c.wait_poll.polling(3, 2),
            Polling {
                spin: us(0),
                budget: us(1000),
                crowded: true
            }
        );
        let c = Config::from_source(&env(&[(WAIT_POLL_US, "10")])).unwrap();
        assert_eq!(c.wait_poll, WaitPoll::Micros(10));
        assert_eq!(
            c.wait_poll.polling(1, 2).spin,
            us(10),
            "the spin fits the budget"
        );
        assert_eq!(c.wait_poll.polling(16, 2).budget, us(10));
        let c = Config::from_source(&env(&[(WAIT_POLL_US, "AUTO")])).unwrap();
        assert_eq!(c.wait_poll, WaitPoll::Auto);
        assert!(c.describe().contains("RGASNET_WAIT_POLL_US"));
        for bad in ["-1", "fast", "10000001"] {
            let e = Config::from_source(&env(&[(WAIT_POLL_US, bad)])).unwrap_err();
            assert_eq!(e.var, WAIT_POLL_US);
            assert!(e.reason.contains("`auto`"), "{}", e.reason);
        }
    }

    #[test]
    fn bad_values_name_the_variable() {
        let e = Config::from_source(&env(&[(AM_NUM_ENTRIES, "lots")])).unwrap_err();
        assert_eq!(e.var, AM_NUM_ENTRIES);
        assert_eq!(e.value, "lots");
        assert!(e
            .to_string()
            .starts_with("GASNET_AM_NUM_ENTRIES=\"lots\" is invalid"));
        let e = Config::from_source(&env(&[(AM_BUFFER_SIZE, "4K")])).unwrap_err();
        assert_eq!(e.var, AM_BUFFER_SIZE);
        let e = Config::from_source(&env(&[(MAX_SEGSIZE, "2/H")])).unwrap_err();
        assert_eq!(e.var, MAX_SEGSIZE);
        let e = Config::from_source(&env(&[(PSHM, "maybe")])).unwrap_err();
        assert_eq!(e.var, PSHM);
        let e = Config::from_source(&env(&[(AM_EVENT_QUEUE_LENGTH, "-1")])).unwrap_err();
        assert_eq!(e.var, AM_EVENT_QUEUE_LENGTH);
        let e = Config::from_source(&env(&[(STALL_WARNING, "soon")])).unwrap_err();
        assert_eq!(e.var, STALL_WARNING);
        let c = Config::from_source(&env(&[(STALL_WARNING, "0")])).unwrap();
        assert_eq!(c.stall_warning_secs, 0);
        let e = Config::from_source(&env(&[(MTU, "100")])).unwrap_err();
        assert_eq!((e.var, e.value.as_str()), (MTU, "100"));
        assert!(e.reason.contains("576 to 65536"), "{e}");
        let c = Config::from_source(&env(&[(MTU, "1500")])).unwrap();
        assert_eq!(c.mtu, Mtu(Some(1500)));
        assert_eq!(Config::from_source(&env(&[])).unwrap().mtu, Mtu(None));
        assert_eq!(
            Config::from_source(&env(&[])).unwrap().portals_max_inflight,
            8
        );
        let c = Config::from_source(&env(&[(PORTALS_MAX_INFLIGHT, "32")])).unwrap();
        assert_eq!(c.portals_max_inflight, 32);
        for bad in ["0", "65537", "many"] {
            let e = Config::from_source(&env(&[(PORTALS_MAX_INFLIGHT, bad)])).unwrap_err();
            assert_eq!((e.var, e.value.as_str()), (PORTALS_MAX_INFLIGHT, bad));
        }
        let c = Config::from_source(&env(&[])).unwrap();
        assert_eq!(c.portals_max_inflight_bytes, 16 << 10);
        let c = Config::from_source(&env(&[(PORTALS_MAX_INFLIGHT_BYTES, "64K")])).unwrap();
        assert_eq!(c.portals_max_inflight_bytes, 64 << 10);
        for bad in ["0", "2G", "lots"] {
            let e = Config::from_source(&env(&[(PORTALS_MAX_INFLIGHT_BYTES, bad)])).unwrap_err();
            assert_eq!((e.var, e.value.as_str()), (PORTALS_MAX_INFLIGHT_BYTES, bad));
        }
        assert_eq!(
            Config::from_source(&env(&[])).unwrap().pshm_barrier_radix,
            4
        );
        let c = Config::from_source(&env(&[(PSHM_BARRIER_RADIX, "8")])).unwrap();
        assert_eq!(c.pshm_barrier_radix, 8);
        for bad in ["1", "9", "four"] {
            let e = Config::from_source(&env(&[(PSHM_BARRIER_RADIX, bad)])).unwrap_err();
            assert_eq!((e.var, e.value.as_str()), (PSHM_BARRIER_RADIX, bad));
            assert!(e.reason.contains("2 to 8"), "{e}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("64mb"), Ok(64 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("99999999999T").is_err());
        assert!(parse_size("abc").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("-1K").is_err());
    }
}
