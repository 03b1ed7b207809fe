//! Turning the records of many runs into rows (median, min–max per figure and path), and
//! writing them as a Markdown table, CSV and JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::pairs::{self, Roles};
use crate::record::{Kind, Record, Unit};
use crate::stats::Spread;

/// One record of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The path (or peer) it was measured on: `native`, `loopback`, `gasnet-udp`, ...
    pub path: String,
    /// The program that printed it.
    pub bench: String,
    /// Which repetition (0-based).
    pub run: usize,
    /// The measurement.
    pub record: Record,
}

/// One figure on one path, summarised over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Path or peer.
    pub path: String,
    /// The program.
    pub bench: String,
    /// Line shape.
    pub kind: Kind,
    /// What was measured.
    pub figure: String,
    /// Message size.
    pub size: Option<u64>,
    /// Unit of `value`.
    pub unit: Unit,
    /// The figure over the runs.
    pub value: Spread,
    /// testam's bandwidth column over the runs (MiB/s).
    pub bandwidth_mbs: Option<Spread>,
}

impl Row {
    /// Same key as [`Record::key`].
    pub fn key(&self) -> String {
        match self.size {
            Some(s) => format!("{} {} {}", self.kind.name(), self.figure, s),
            None => format!("{} {}", self.kind.name(), self.figure),
        }
    }
}

/// Groups samples by (path, figure key), keeping first-seen order of paths and of figures.
pub fn aggregate(samples: &[Sample]) -> Vec<Row> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        let k = (s.path.clone(), s.record.key());
        let g = groups.entry(k.clone()).or_default();
        if g.is_empty() {
            order.push(k);
        }
        g.push(s);
    }
    let mut rows = Vec::new();
    for k in order {
        let Some(g) = groups.get(&k) else { continue };
        let Some(first) = g.first() else { continue };
        let values: Vec<f64> = g.iter().map(|s| s.record.value).collect();
        let bws: Vec<f64> = g.iter().filter_map(|s| s.record.bandwidth_mbs).collect();
        let Some(value) = Spread::of(&values) else {
            continue;
        };
        rows.push(Row {
            path: first.path.clone(),
            bench: first.bench.clone(),
            kind: first.record.kind,
            figure: first.record.figure.clone(),
            size: first.record.size,
            unit: first.record.unit,
            value,
            bandwidth_mbs: Spread::of(&bws),
        });
    }
    rows
}

/// The raw baseline a row is held against on its path, as (label, value): round trips
/// against the raw UDP round trip of the nearest size (8 or 65,000 bytes; the shared-memory
/// flag ping-pong on a PSHM path), bandwidths against the raw UDP stream. Only figures whose
/// meaning matches a round trip or a bandwidth get one.
pub fn raw_reference<'a>(rows: &'a [Row], row: &Row) -> Option<(&'a str, f64)> {
    // The same path's baselines; a one-rank path (loopback) has none of its own and is held
    // against the native path's.
    let find = |figure: &str, size: Option<u64>| {
        let on = |path: &str| {
            rows.iter().find(|r| {
                r.path == path && r.kind == Kind::Raw && r.figure == figure && r.size == size
            })
        };
        on(&row.path).or_else(|| on("native"))
    };
    let round_trip =
        row.figure.contains("ping-pong") || row.kind == Kind::Latency || row.kind == Kind::Barrier;
    if row.kind == Kind::Raw {
        return None;
    }
    if row.unit == Unit::Us && round_trip {
        if row.path.contains("pshm") {
            if let Some(r) = find("shm flag pingpong rtt", None) {
                return Some(("raw shm flag rtt", r.value.median));
            }
        }
        let big = row.size.is_some_and(|s| s >= 32_768);
        let (size, label) = if big {
            (65_000, "raw udp 65000 B rtt")
        } else {
            (8, "raw udp 8 B rtt")
        };
        return find("udp pingpong rtt", Some(size)).map(|r| (label, r.value.median));
    }
    if row.unit.higher_is_better() {
        // A shared-memory path moves bytes with memcpy, not through a socket.
        if row.path.contains("pshm") {
            if let Some(r) = find("memcpy", Some(1 << 20)) {
                return Some(("raw memcpy", r.value.median));
            }
        }
        return find("udp stream", Some(1 << 20)).map(|r| ("raw udp stream", r.value.median));
    }
    None
}

/// The row's value in the unit its raw reference uses (KB/s → MB/s for throughput).
fn comparable(row: &Row) -> f64 {
    match row.unit {
        Unit::KBps => row.value.median / 1000.0,
        _ => row.value.median,
    }
}

/// Sizes shown in the Markdown table (everything is in the CSV/JSON).
pub const TABLE_SIZES: [u64; 7] = [8, 64, 4096, 65_000, 65_536, 1 << 20, 4 << 20];

fn fmt_num(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The Markdown table: figure, size, path, median, min–max, unit, ratio to the raw baseline
/// and to each peer (GASNet's programs, by their `roles`) measured on the same figure. A peer
/// on another medium than the row's path (native against smp-conduit, say) gets no ratio.
pub fn markdown_table(rows: &[Row], roles: &Roles) -> String {
    let peers: Vec<String> = {
        let mut p: Vec<String> = rows
            .iter()
            .filter(|r| roles.get(&r.path).is_some_and(|role| role.peer))
            .map(|r| r.path.clone())
            .collect();
        p.sort();
        p.dedup();
        p
    };
    let mut s = String::from("| figure | size (B) | path | median | min–max | unit | vs raw |");
    for p in &peers {
        let _ = write!(s, " vs {p} |");
    }
    s.push_str("\n|---|---:|---|---:|---:|---|---:|");
    for _ in &peers {
        s.push_str("---:|");
    }
    s.push('\n');
    let shown = rows
        .iter()
        .filter(|r| r.size.is_none_or(|sz| TABLE_SIZES.contains(&sz)) || r.kind == Kind::Raw);
    for r in shown {
        let vs_raw = match raw_reference(rows, r) {
            Some((label, v)) if v > 0.0 => format!("{:.2}× {label}", comparable(r) / v),
            _ => "–".into(),
        };
        let _ = write!(
            s,
            "| {} | {} | {} | {} | {}–{} | {} | {} |",
            r.figure,
            r.size.map(|x| x.to_string()).unwrap_or_default(),
            r.path,
            fmt_num(r.value.median),
            fmt_num(r.value.min),
            fmt_num(r.value.max),
            r.unit.name(),
            vs_raw
        );
        for p in &peers {
            let cell = if !pairs::paired_paths(roles, &r.path, p) {
                "–".to_string()
            } else {
                rows.iter()
                    .find(|o| &o.path == p && o.key() == r.key())
                    .filter(|o| o.value.median > 0.0)
                    .map_or("–".to_string(), |o| {
                        format!("{:.2}×", r.value.median / o.value.median)
                    })
            };
            let _ = write!(s, " {cell} |");
        }
        s.push('\n');
    }
    s
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

/// Every row as CSV.
pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "path,bench,kind,figure,size,unit,median,min,max,runs,bandwidth_mbs_median,raw_ratio\n",
    );
    for r in rows {
        let ratio = raw_reference(rows, r)
            .filter(|(_, v)| *v > 0.0)
            .map(|(_, v)| comparable(r) / v);
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{}",
            r.path,
            r.bench,
            r.kind.name(),
            r.figure,
            r.size.map(|x| x.to_string()).unwrap_or_default(),
            r.unit.name(),
            r.value.csv_fields(),
            opt(r.bandwidth_mbs.map(|b| b.median)),
            opt(ratio)
        );
    }
    s
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

/// Every row as JSON, with the run's metadata (`meta` pairs are strings) and the list of
/// what was skipped and why.
pub fn json(rows: &[Row], meta: &[(&str, String)], skipped: &[String]) -> String {
    let mut s = String::from("{\n  \"meta\": {");
    for (i, (k, v)) in meta.iter().enumerate() {
        let _ = write!(
            s,
            "{}{}: {}",
            if i > 0 { ", " } else { "" },
            json_str(k),
            json_str(v)
        );
    }
    s.push_str("},\n  \"skipped\": [");
    for (i, k) in skipped.iter().enumerate() {
        let _ = write!(s, "{}{}", if i > 0 { ", " } else { "" }, json_str(k));
    }
    s.push_str("],\n  \"rows\": [\n");
    for (i, r) in rows.iter().enumerate() {
        let ratio = raw_reference(rows, r)
            .filter(|(_, v)| *v > 0.0)
            .map(|(_, v)| comparable(r) / v);
        let _ = writeln!(
            s,
            "    {{\"path\": {}, \"bench\": {}, \"kind\": {}, \"figure\": {}, \"size\": {}, \"unit\": {}, \"median\": {}, \"min\": {}, \"max\": {}, \"runs\": {}, \"bandwidth_mbs\": {}, \"raw_ratio\": {}}}{}",
            json_str(&r.path),
            json_str(&r.bench),
            json_str(r.kind.name()),
            json_str(&r.figure),
            r.size.map_or("null".into(), |x| x.to_string()),
            json_str(r.unit.name()),
            json_num(r.value.median),
            json_num(r.value.min),
            json_num(r.value.max),
            r.value.n,
            r.bandwidth_mbs.map_or("null".into(), |b| json_num(b.median)),
            ratio.map_or("null".into(), json_num),
            if i + 1 < rows.len() { "," } else { "" }
        );
    }
    s.push_str("  ]\n}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::pairs::test_roles;
    use crate::parse::parse_output;

    fn samples(path: &str, text: &str, run: usize) -> Vec<Sample> {
        parse_output(text)
            .unwrap()
            .into_iter()
            .map(|record| Sample {
                path: path.into(),
                bench: "testam".into(),
                run,
                record,
            })
            .collect()
    }

    fn runs() -> Vec<Sample> {
        let mut v = Vec::new();
        for (i, (short, raw)) in [("9.000", "6.00"), ("12.000", "8.00"), ("10.000", "7.00")]
            .iter()
            .enumerate()
        {
            let text = format!(
                "raw: udp pingpong 8 byte rtt {raw} us\nraw: udp stream 1048576 byte 1000.0 MB/s\n\
                 A:         AMShort     ping-pong roundtrip ReqRep:  0.010 sec   {short} us\n"
            );
            v.extend(samples("native", &text, i));
        }
        v.extend(samples(
            "gasnet-udp",
            "A:         AMShort     ping-pong roundtrip ReqRep:  0.010 sec   20.000 us\n",
            0,
        ));
        v
    }

    #[test]
    fn medians_ranges_and_ratios() {
        let rows = aggregate(&runs());
        assert_eq!(rows.len(), 4);
        let am = &rows[2];
        assert_eq!(am.figure, "AMShort ping-pong roundtrip ReqRep");
        assert_eq!(
            (am.value.median, am.value.min, am.value.max, am.value.n),
            (10.0, 9.0, 12.0, 3)
        );
        assert_eq!(raw_reference(&rows, am), Some(("raw udp 8 B rtt", 7.0)));
        assert_eq!(raw_reference(&rows, &rows[0]), None);
        let md = markdown_table(&rows, &test_roles());
        assert!(
            md.starts_with(
                "| figure | size (B) | path | median | min–max | unit | vs raw | vs gasnet-udp |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| AMShort ping-pong roundtrip ReqRep |  | native | 10.0 | 9.00–12.0 | us | 1.43× raw udp 8 B rtt | 0.50× |"),
            "{md}"
        );
        let csv = csv(&rows);
        assert!(
            csv.lines().nth(3).unwrap().starts_with(
                "native,testam,am,AMShort ping-pong roundtrip ReqRep,,us,10,9,12,3,,1.428"
            ),
            "{csv}"
        );
        let js = json(
            &rows,
            &[("host", "h\"1".into())],
            &["gasnet: missing".into()],
        );
        assert!(js.contains("\"meta\": {\"host\": \"h\\\"1\"}"), "{js}");
        assert!(js.contains("\"skipped\": [\"gasnet: missing\"]"));
        assert!(js.contains("\"figure\": \"AMShort ping-pong roundtrip ReqRep\", \"size\": null, \"unit\": \"us\", \"median\": 10, \"min\": 9, \"max\": 12, \"runs\": 3"));
    }

    #[test]
    fn pshm_rows_use_shared_memory_baselines() {
        let text = "raw: udp pingpong 8 byte rtt 7.00 us\nraw: udp stream 1048576 byte 4000.0 MB/s\n\
                    raw: shm flag pingpong rtt 0.100 us\nraw: memcpy 1048576 byte 40000.0 MB/s\n\
                    A:         AMShort     ping-pong roundtrip ReqRep:  0.002 sec    2.000 us\n\
                    B:   0 -    1048576 byte :      30 iters, throughput 20000000.000 KB/sec (put_nbi_bulk throughput)\n";
        let rows = aggregate(&samples("pshm", text, 0));
        assert_eq!(
            raw_reference(&rows, &rows[4]),
            Some(("raw shm flag rtt", 0.1))
        );
        assert_eq!(
            raw_reference(&rows, &rows[5]),
            Some(("raw memcpy", 40000.0))
        );
        // 20 GB/s against 40 GB/s.
        assert!(markdown_table(&rows, &test_roles()).contains("| 0.50× raw memcpy |"));
    }

    #[test]
    fn json_escapes() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
        assert_eq!(json_num(f64::NAN), "null");
    }
}
