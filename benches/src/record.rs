//! One measurement, and how it is printed: GASNet's line shapes (`BENCH-FORMAT.md`) or a CSV
//! row. The benchmark binaries build [`Record`]s; [`crate::parse`] reads the same lines back
//! (from rgasnet's binaries or GASNet's) into the same type, so that one model serves printing,
//! parsing and comparing.

use std::fmt::Write as _;

/// Which program shape a line has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// testsmall section A: latency per size (`... us ave. (put latency)`).
    Latency,
    /// testsmall's throughput lines (rank printed 2 wide).
    SmallThroughput,
    /// testlarge's bandwidth lines (rank printed 3 wide).
    LargeThroughput,
    /// testam: description, total seconds, average microseconds, optional MB/s.
    Am,
    /// testbarrier: total seconds and average barrier latency.
    Barrier,
    /// A raw baseline of the machine (`raw: ...`).
    Raw,
}

impl Kind {
    /// Stable lower-case name (CSV/JSON).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Latency => "latency",
            Kind::SmallThroughput => "small_throughput",
            Kind::LargeThroughput => "large_throughput",
            Kind::Am => "am",
            Kind::Barrier => "barrier",
            Kind::Raw => "raw",
        }
    }

    /// Inverse of [`Kind::name`].
    pub fn from_name(s: &str) -> Option<Kind> {
        [
            Kind::Latency,
            Kind::SmallThroughput,
            Kind::LargeThroughput,
            Kind::Am,
            Kind::Barrier,
            Kind::Raw,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// The unit of [`Record::value`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Microseconds (latency, round trip).
    Us,
    /// 1000 bytes per second (GASNet's `KB/sec`).
    KBps,
    /// 10^6 bytes per second (raw baselines).
    MBps,
}

impl Unit {
    /// How the unit is written in CSV/JSON and tables.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Us => "us",
            Unit::KBps => "KB/s",
            Unit::MBps => "MB/s",
        }
    }

    /// Whether larger values are better (bandwidth) rather than worse (time).
    pub fn higher_is_better(self) -> bool {
        !matches!(self, Unit::Us)
    }
}

/// One measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The line shape.
    pub kind: Kind,
    /// GASNet's section letter (none for barrier and raw lines).
    pub section: Option<char>,
    /// The rank that measured (testsmall/testlarge print it).
    pub rank: Option<u32>,
    /// What was measured, without size: `put latency`, `AMShort ping-pong roundtrip ReqRep`,
    /// `Named Barrier`, `udp pingpong rtt`...
    pub figure: String,
    /// Message size in bytes, where the figure has one.
    pub size: Option<u64>,
    /// Operations timed.
    pub iters: Option<u64>,
    /// Total time in microseconds, where the line shows it.
    pub total_us: Option<f64>,
    /// The figure itself, in [`Record::unit`].
    pub value: f64,
    /// Unit of `value`.
    pub unit: Unit,
    /// testam's bandwidth column (MiB/s, as GASNet computes it).
    pub bandwidth_mbs: Option<f64>,
}

impl Record {
    /// A key that identifies the same figure across runs: kind, figure and size.
    pub fn key(&self) -> String {
        match self.size {
            Some(s) => format!("{} {} {}", self.kind.name(), self.figure, s),
            None => format!("{} {}", self.kind.name(), self.figure),
        }
    }

    /// The line as GASNet's programs print it (`BENCH-FORMAT.md`).
    pub fn gasnet_line(&self) -> String {
        let sec = self.section.unwrap_or('A');
        let rank = self.rank.unwrap_or(0);
        let size = self.size.unwrap_or(0);
        let iters = self.iters.unwrap_or(0);
        let total_us = self.total_us.unwrap_or(0.0);
        match self.kind {
            Kind::Latency => format!(
                "{sec}: {rank:>2} - {size:>10} byte : {iters:>7} iters, latency {:>10} us total, {:>9.3} us ave. ({})",
                total_us.round() as u64, self.value, self.figure
            ),
            Kind::SmallThroughput => format!(
                "{sec}: {rank:>2} - {size:>10} byte : {iters:>7} iters, throughput {:>11.3} KB/sec ({})",
                self.value, self.figure
            ),
            Kind::LargeThroughput => format!(
                "{sec}: {rank:>3} - {size:>10} byte : {iters:>7} iters, throughput {:>11.3} KB/sec ({})",
                self.value, self.figure
            ),
            Kind::Am => {
                // GASNet: "%c: %-46s: %6.3f sec %8.3f us" then "  %7.3f MB/s" for sized
                // messages; the description starts with the size in 7 columns.
                let desc = match self.size {
                    Some(s) => format!("{s:>7} {}", am_desc_columns(&self.figure)),
                    None => format!("{:>7} {}", "", am_desc_columns(&self.figure)),
                };
                let mut line = format!(
                    "{sec}: {desc:<46}: {:>6.3} sec {:>8.3} us",
                    total_us / 1e6,
                    self.value
                );
                if let Some(bw) = self.bandwidth_mbs {
                    let _ = write!(line, "  {bw:>7.3} MB/s");
                }
                line
            }
            Kind::Barrier => format!(
                "Total time: {:>8.3} sec  Avg {} latency: {:>8.3} us",
                total_us / 1e6,
                self.figure,
                self.value
            ),
            Kind::Raw => {
                // "raw: udp pingpong 8 byte rtt 6.41 us", "raw: udp stream 1048576 byte
                // 9267.0 MB/s", "raw: shm flag pingpong rtt 0.110 us".
                let (head, tail) = match self.size {
                    Some(size) => match self.figure.strip_suffix(" rtt") {
                        Some(stem) => (stem, format!(" {size} byte rtt")),
                        None => (self.figure.as_str(), format!(" {size} byte")),
                    },
                    None => (self.figure.as_str(), String::new()),
                };
                match self.unit {
                    Unit::Us if self.value < 1.0 => {
                        format!("raw: {head}{tail} {:.3} us", self.value)
                    }
                    Unit::Us => format!("raw: {head}{tail} {:.2} us", self.value),
                    Unit::MBps | Unit::KBps => {
                        format!("raw: {head}{tail} {:.1} {}", self.value, self.unit.name())
                    }
                }
            }
        }
    }

    /// CSV header matching [`Record::csv_row`].
    pub const CSV_HEADER: &'static str =
        "kind,section,rank,figure,size,iters,total_us,value,unit,bandwidth_mbs";

    /// The record as one CSV row (figures never contain commas or quotes; they are quoted
    /// anyway when they do, per RFC 4180).
    pub fn csv_row(&self) -> String {
        let opt = |v: Option<String>| v.unwrap_or_default();
        format!(
            "{},{},{},{},{},{},{},{},{},{}",
            self.kind.name(),
            opt(self.section.map(String::from)),
            opt(self.rank.map(|r| r.to_string())),
            csv_field(&self.figure),
            opt(self.size.map(|s| s.to_string())),
            opt(self.iters.map(|s| s.to_string())),
            opt(self.total_us.map(|t| format!("{t:.3}"))),
            self.value,
            self.unit.name(),
            opt(self.bandwidth_mbs.map(|b| format!("{b:.3}"))),
        )
    }
}

/// testam's description columns: category padded to 11, pattern to 9, direction to 9, then
/// the request/reply kind (`AMShort     ping-pong roundtrip ReqRep`). The figure is stored
/// with single spaces; this restores GASNet's alignment.
fn am_desc_columns(figure: &str) -> String {
    let words: Vec<&str> = figure.split_whitespace().collect();
    match words.as_slice() {
        [cat, pattern, trip, rr] => format!("{cat:<11} {pattern:<9} {trip:<9} {rr}"),
        _ => figure.to_string(),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Builders for the records the benchmark binaries print.
impl Record {
    /// testam line: `figure` is `AMMedium ping-pong roundtrip ReqRep` and the like;
    /// `roundtrip` doubles the bytes counted for the bandwidth, as GASNet does.
    pub fn am(
        section: char,
        figure: &str,
        size: Option<u64>,
        iters: u64,
        total: std::time::Duration,
        roundtrip: bool,
    ) -> Record {
        let total_us = total.as_secs_f64() * 1e6;
        let secs = total.as_secs_f64().max(1e-12);
        // GASNet prints MB/s only for sized messages: bytes x (2 if round trip) x iters
        // over 2^20 per second.
        let bandwidth_mbs = size.filter(|s| *s > 0).map(|s| {
            (s as f64 * if roundtrip { 2.0 } else { 1.0 } * iters as f64 / (1024.0 * 1024.0)) / secs
        });
        Record {
            kind: Kind::Am,
            section: Some(section),
            rank: None,
            figure: figure.split_whitespace().collect::<Vec<_>>().join(" "),
            size,
            iters: Some(iters),
            total_us: Some(total_us),
            value: total_us / iters.max(1) as f64,
            unit: Unit::Us,
            bandwidth_mbs,
        }
    }

    /// A raw round-trip figure: `udp pingpong rtt` with a size, `shm flag pingpong rtt`
    /// without.
    pub fn raw_rtt(figure: &str, size: Option<u64>, rtt: std::time::Duration) -> Record {
        Record {
            kind: Kind::Raw,
            section: None,
            rank: None,
            figure: figure.to_string(),
            size,
            iters: None,
            total_us: None,
            value: rtt.as_secs_f64() * 1e6,
            unit: Unit::Us,
            bandwidth_mbs: None,
        }
    }

    /// A raw bandwidth figure in MB/s (10^6 bytes per second): `udp stream`, `memcpy`.
    pub fn raw_bandwidth(figure: &str, size: u64, bytes_per_sec: f64) -> Record {
        Record {
            kind: Kind::Raw,
            section: None,
            rank: None,
            figure: figure.to_string(),
            size: Some(size),
            iters: None,
            total_us: None,
            value: bytes_per_sec / 1e6,
            unit: Unit::MBps,
            bandwidth_mbs: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn am_lines_have_gasnet_columns() {
        let r = Record::am(
            'A',
            "AMShort ping-pong roundtrip ReqRep",
            None,
            1000,
            Duration::from_micros(9635),
            true,
        );
        assert_eq!(
            r.gasnet_line(),
            "A:         AMShort     ping-pong roundtrip ReqRep:  0.010 sec    9.635 us"
        );
        let r = Record::am(
            'A',
            "AMShort flood one-way Req",
            None,
            1000,
            Duration::from_micros(5468),
            false,
        );
        assert_eq!(
            r.gasnet_line(),
            "A:         AMShort     flood     one-way   Req   :  0.005 sec    5.468 us"
        );
        let r = Record::am(
            'B',
            "AMMedium ping-pong roundtrip ReqRep",
            Some(64),
            1000,
            Duration::from_micros(8949),
            true,
        );
        assert_eq!(
            r.gasnet_line(),
            "B:      64 AMMedium    ping-pong roundtrip ReqRep:  0.009 sec    8.949 us   13.641 MB/s"
        );
    }

    #[test]
    fn small_large_barrier_lines() {
        let mut r = Record {
            kind: Kind::Latency,
            section: Some('A'),
            rank: Some(0),
            figure: "put latency".into(),
            size: Some(8),
            iters: Some(2000),
            total_us: Some(20730.0),
            value: 10.365,
            unit: Unit::Us,
            bandwidth_mbs: None,
        };
        assert_eq!(
            r.gasnet_line(),
            "A:  0 -          8 byte :    2000 iters, latency      20730 us total,    10.365 us ave. (put latency)"
        );
        r.kind = Kind::SmallThroughput;
        r.section = Some('B');
        r.size = Some(128);
        r.value = 12215.978;
        r.unit = Unit::KBps;
        r.figure = "put throughput".into();
        assert_eq!(
            r.gasnet_line(),
            "B:  0 -        128 byte :    2000 iters, throughput   12215.978 KB/sec (put throughput)"
        );
        r.kind = Kind::LargeThroughput;
        r.section = Some('A');
        r.size = Some(1_048_576);
        r.iters = Some(30);
        r.value = 6816063.901;
        r.figure = "put_bulk throughput".into();
        assert_eq!(
            r.gasnet_line(),
            "A:   0 -    1048576 byte :      30 iters, throughput 6816063.901 KB/sec (put_bulk throughput)"
        );
        let b = Record {
            kind: Kind::Barrier,
            section: None,
            rank: None,
            figure: "Named Barrier".into(),
            size: None,
            iters: Some(2000),
            total_us: Some(27_000.0),
            value: 13.601,
            unit: Unit::Us,
            bandwidth_mbs: None,
        };
        assert_eq!(
            b.gasnet_line(),
            "Total time:    0.027 sec  Avg Named Barrier latency:   13.601 us"
        );
    }

    #[test]
    fn raw_lines() {
        let us = Duration::from_nanos;
        assert_eq!(
            Record::raw_rtt("udp pingpong rtt", Some(8), us(6410)).gasnet_line(),
            "raw: udp pingpong 8 byte rtt 6.41 us"
        );
        assert_eq!(
            Record::raw_rtt("udp pingpong rtt", Some(65000), us(13_200)).gasnet_line(),
            "raw: udp pingpong 65000 byte rtt 13.20 us"
        );
        assert_eq!(
            Record::raw_rtt("shm flag pingpong rtt", None, us(110)).gasnet_line(),
            "raw: shm flag pingpong rtt 0.110 us"
        );
        assert_eq!(
            Record::raw_bandwidth("udp stream", 1_048_576, 9267.0e6).gasnet_line(),
            "raw: udp stream 1048576 byte 9267.0 MB/s"
        );
        assert_eq!(
            Record::raw_bandwidth("memcpy", 1_048_576, 42000.0e6).gasnet_line(),
            "raw: memcpy 1048576 byte 42000.0 MB/s"
        );
    }

    #[test]
    fn csv_rows() {
        let r = Record::raw_bandwidth("udp stream", 1_048_576, 9267.0e6);
        assert_eq!(r.csv_row(), "raw,,,udp stream,1048576,,,9267,MB/s,");
        assert_eq!(csv_field("a,b\"c"), "\"a,b\"\"c\"");
        assert_eq!(
            Kind::from_name("large_throughput"),
            Some(Kind::LargeThroughput)
        );
        assert_eq!(Kind::from_name("nope"), None);
    }
}
