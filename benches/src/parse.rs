//! Reading benchmark output back into [`Record`]s: rgasnet's binaries and GASNet's test
//! programs print the same line shapes, so one parser reads both.
//!
//! Lines that are not measurements (headers, `Running ...`, blank lines, GASNet's ` max:`
//! markers, conduit banners) are skipped. A line that starts like a measurement but does not
//! parse is a [`ParseError`] naming the line: a silently dropped figure would make a
//! comparison quietly wrong.

use crate::record::{Kind, Record, Unit};

/// A measurement line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The line has a measurement's shape but a field is missing or not a number.
    #[error("line {line}: malformed {what} line ({reason}): `{text}`")]
    Malformed {
        /// 1-based line number in the output.
        line: usize,
        /// Which shape it looked like.
        what: &'static str,
        /// What was wrong.
        reason: String,
        /// The line itself.
        text: String,
    },
}

/// Parses a whole program output; returns every record in order.
pub fn parse_output(text: &str) -> Result<Vec<Record>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(r) = parse_line(line, i + 1)? {
            out.push(r);
        }
    }
    Ok(out)
}

/// Parses one line (`lineno` is used in errors only). `Ok(None)` for lines that are not
/// measurements.
pub fn parse_line(line: &str, lineno: usize) -> Result<Option<Record>, ParseError> {
    let text = strip_rank_tag(line.trim_end());
    let bad = |what: &'static str, reason: &str| ParseError::Malformed {
        line: lineno,
        what,
        reason: reason.to_string(),
        text: line.to_string(),
    };
    if let Some(rest) = text.trim_start().strip_prefix("raw:") {
        return parse_raw(rest).map(Some).ok_or_else(|| {
            bad(
                "raw",
                "expected `raw: <what> [N byte] [rtt] <value> us|MB/s`",
            )
        });
    }
    if let Some(rest) = text.trim_start().strip_prefix("Total time:") {
        return parse_barrier(rest).map(Some).ok_or_else(|| {
            bad(
                "barrier",
                "expected `Total time: T sec  Avg NAME latency: L us`",
            )
        });
    }
    // Section lines: a single letter, a colon.
    let mut chars = text.chars();
    let (Some(sec), Some(':')) = (chars.next(), chars.next()) else {
        return Ok(None);
    };
    if !sec.is_ascii_uppercase() {
        return Ok(None);
    }
    let rest = chars.as_str();
    if rest.contains(" iters, ") {
        return parse_small_large(sec, rest)
            .map(Some)
            .map_err(|reason| bad("testsmall/testlarge", reason));
    }
    if rest.contains(" sec ") && rest.contains(" us") {
        return parse_am(sec, rest)
            .map(Some)
            .map_err(|reason| bad("testam", reason));
    }
    Ok(None)
}

/// `rgasnetrun --tag-output` prefixes `[rank] `.
fn strip_rank_tag(line: &str) -> &str {
    if let Some(rest) = line.strip_prefix('[') {
        if let Some((n, tail)) = rest.split_once("] ") {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                return tail;
            }
        }
    }
    line
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.trim().parse().ok()
}

/// ` 0 -          8 byte :    2000 iters, latency      20730 us total,    10.365 us ave. (put latency)`
/// ` 0 -        128 byte :    2000 iters, throughput   12215.978 KB/sec (put throughput)`
fn parse_small_large(sec: char, rest: &str) -> Result<Record, &'static str> {
    let (head, tail) = rest.split_once(" byte :").ok_or("no ` byte :`")?;
    let (rank_s, size_s) = head.split_once(" - ").ok_or("no `rank - size`")?;
    let rank: u32 = num(rank_s).ok_or("rank is not a number")?;
    let size: u64 = num(size_s).ok_or("size is not a number")?;
    let (iters_s, after) = tail.split_once(" iters, ").ok_or("no `iters,`")?;
    let iters: u64 = num(iters_s).ok_or("iteration count is not a number")?;
    let open = after.rfind('(').ok_or("no `(description)`")?;
    let figure = after[open + 1..]
        .strip_suffix(')')
        .ok_or("description not closed")?
        .trim()
        .to_string();
    let body = &after[..open];
    if let Some(lat) = body.strip_prefix("latency") {
        let (total_s, avg_part) = lat.split_once(" us total,").ok_or("no `us total,`")?;
        let total: f64 = num(total_s).ok_or("total is not a number")?;
        let avg_s = avg_part
            .trim()
            .strip_suffix("us ave.")
            .ok_or("no `us ave.`")?;
        let avg: f64 = num(avg_s).ok_or("average is not a number")?;
        return Ok(Record {
            kind: Kind::Latency,
            section: Some(sec),
            rank: Some(rank),
            figure,
            size: Some(size),
            iters: Some(iters),
            total_us: Some(total),
            value: avg,
            unit: Unit::Us,
            bandwidth_mbs: None,
        });
    }
    if let Some(tp) = body.strip_prefix("throughput") {
        let v_s = tp.trim().strip_suffix("KB/sec").ok_or("no `KB/sec`")?;
        let v: f64 = num(v_s).ok_or("throughput is not a number")?;
        // testlarge prints the rank 3 wide and measures bulk transfers; testsmall 2 wide.
        let wide = rank_s.len() >= 4 || figure.contains("bulk");
        return Ok(Record {
            kind: if wide {
                Kind::LargeThroughput
            } else {
                Kind::SmallThroughput
            },
            section: Some(sec),
            rank: Some(rank),
            figure,
            size: Some(size),
            iters: Some(iters),
            total_us: None,
            value: v,
            unit: Unit::KBps,
            bandwidth_mbs: None,
        });
    }
    Err("neither `latency` nor `throughput`")
}

/// ` [N: ]   SIZE AMMedium    ping-pong roundtrip ReqRep:  0.009 sec    8.949 us   13.641 MB/s`
fn parse_am(sec: char, rest: &str) -> Result<Record, &'static str> {
    let colon = rest.rfind(": ").ok_or("no `: ` before the times")?;
    let (desc, times) = (&rest[..colon], &rest[colon + 1..]);
    let mut words: Vec<&str> = desc.split_whitespace().collect();
    // GASNet prefixes "N: " (the node) in jobs of more than two nodes.
    if words.first().is_some_and(|w| w.ends_with(':')) {
        words.remove(0);
    }
    let size = match words.first().and_then(|w| w.parse::<u64>().ok()) {
        Some(s) => {
            words.remove(0);
            Some(s)
        }
        None => None,
    };
    if words.is_empty() || !words[0].starts_with("AM") {
        return Err("description does not start with an AM category");
    }
    let t: Vec<&str> = times.split_whitespace().collect();
    let (total_s, avg_us) = match t.as_slice() {
        [total, "sec", avg, "us", ..] => (
            num::<f64>(total).ok_or("total is not a number")?,
            num::<f64>(avg).ok_or("average is not a number")?,
        ),
        _ => return Err("expected `T sec A us`"),
    };
    let bandwidth_mbs = match t.as_slice() {
        [_, _, _, _, bw, "MB/s"] => Some(num::<f64>(bw).ok_or("bandwidth is not a number")?),
        [_, _, _, _] => None,
        _ => return Err("unexpected text after the average"),
    };
    Ok(Record {
        kind: Kind::Am,
        section: Some(sec),
        rank: None,
        figure: words.join(" "),
        size,
        // Not printed (and total / average is too coarse at 3 decimals to recover it).
        iters: None,
        total_us: Some(total_s * 1e6),
        value: avg_us,
        unit: Unit::Us,
        bandwidth_mbs,
    })
}

/// `    0.027 sec  Avg Named Barrier latency:   13.601 us`
fn parse_barrier(rest: &str) -> Option<Record> {
    let (total_s, tail) = rest.split_once(" sec")?;
    let total: f64 = num(total_s)?;
    let tail = tail.trim_start().strip_prefix("Avg ")?;
    let (name, lat) = tail.split_once(" latency:")?;
    let v: f64 = num(lat.trim().strip_suffix("us")?)?;
    Some(Record {
        kind: Kind::Barrier,
        section: None,
        rank: None,
        figure: name.trim().to_string(),
        size: None,
        iters: None,
        total_us: Some(total * 1e6),
        value: v,
        unit: Unit::Us,
        bandwidth_mbs: None,
    })
}

/// ` udp pingpong 8 byte rtt 6.41 us`, ` udp stream 1048576 byte 9267.0 MB/s`,
/// ` shm flag pingpong rtt 0.110 us`
fn parse_raw(rest: &str) -> Option<Record> {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let (unit_w, words) = words.split_last()?;
    let (value_w, words) = words.split_last()?;
    let unit = match *unit_w {
        "us" => Unit::Us,
        "MB/s" => Unit::MBps,
        "KB/s" | "KB/sec" => Unit::KBps,
        _ => return None,
    };
    let value: f64 = num(value_w)?;
    let mut size = None;
    let mut figure = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if let (Some(n), Some(&"byte")) = (words[i].parse::<u64>().ok(), words.get(i + 1)) {
            size = Some(n);
            i += 2;
            continue;
        }
        figure.push(words[i]);
        i += 1;
    }
    if figure.is_empty() {
        return None;
    }
    Some(Record {
        kind: Kind::Raw,
        section: None,
        rank: None,
        figure: figure.join(" "),
        size,
        iters: None,
        total_us: None,
        value,
        unit,
        bandwidth_mbs: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample lines of `BENCH-FORMAT.md` (GASNet's shapes), each parsed field by field.
    #[test]
    fn gasnet_testsmall_and_testlarge_samples() {
        let out = "\
A:  0 -          8 byte :    2000 iters, latency      20730 us total,    10.365 us ave. (put latency)
A:  0 -          8 byte :    2000 iters, latency      20945 us total,    10.473 us ave. (get latency)
B:  0 -        128 byte :    2000 iters, throughput   12215.978 KB/sec (put throughput)
A:   0 -    1048576 byte :      30 iters, throughput 6816063.901 KB/sec (put_bulk throughput)
C:   0 -    1048576 byte :      30 iters, throughput 6179843.090 KB/sec (get_nb_bulk throughput)
";
        let r = parse_output(out).unwrap();
        assert_eq!(r.len(), 5);
        assert_eq!(r[0].kind, Kind::Latency);
        assert_eq!(r[0].section, Some('A'));
        assert_eq!(r[0].rank, Some(0));
        assert_eq!(r[0].size, Some(8));
        assert_eq!(r[0].iters, Some(2000));
        assert_eq!(r[0].total_us, Some(20730.0));
        assert_eq!(r[0].value, 10.365);
        assert_eq!(r[0].figure, "put latency");
        assert_eq!(r[1].figure, "get latency");
        assert_eq!(r[1].value, 10.473);
        assert_eq!(r[2].kind, Kind::SmallThroughput);
        assert_eq!(r[2].unit, Unit::KBps);
        assert_eq!(r[2].value, 12215.978);
        assert_eq!(r[2].size, Some(128));
        assert_eq!(r[3].kind, Kind::LargeThroughput);
        assert_eq!(r[3].size, Some(1_048_576));
        assert_eq!(r[3].iters, Some(30));
        assert_eq!(r[3].value, 6816063.901);
        assert_eq!(r[4].section, Some('C'));
        assert_eq!(r[4].figure, "get_nb_bulk throughput");
        // Printing what was parsed gives the sample back, byte for byte.
        for (rec, line) in r.iter().zip(out.lines()) {
            assert_eq!(rec.gasnet_line(), line);
        }
    }

    #[test]
    fn gasnet_testam_samples_with_header_and_max_marker() {
        let out = "\
Running AM performance test with 1000 iterations...
   Msg Sz  Description                             Total time   Avg. time   Bandwidth
   ------  -----------                             ----------   ---------   ---------
A:         AMShort     ping-pong roundtrip ReqRep:  0.010 sec    9.635 us
A:         AMShort     ping-pong roundtrip ReqReq:  0.017 sec   17.325 us

A:         AMShort     flood     one-way   Req   :  0.005 sec    5.468 us
A:         AMShort     flood     roundtrip ReqRep:  0.006 sec    5.666 us
B:      64 AMMedium    ping-pong roundtrip ReqRep:  0.009 sec    8.949 us   13.641 MB/s
 max:
B:   65000 AMMedium    ping-pong roundtrip ReqRep:  0.050 sec   50.000 us 2479.553 MB/s
C: 2: AMLong      flood     one-way   Req   :  0.005 sec    5.468 us
";
        let r = parse_output(out).unwrap();
        assert_eq!(r.len(), 7);
        assert_eq!(r[0].figure, "AMShort ping-pong roundtrip ReqRep");
        assert_eq!(r[0].size, None);
        assert_eq!(r[0].value, 9.635);
        assert_eq!(r[0].total_us, Some(10_000.0));
        assert_eq!(r[1].value, 17.325);
        assert_eq!(r[2].figure, "AMShort flood one-way Req");
        assert_eq!(r[3].figure, "AMShort flood roundtrip ReqRep");
        assert_eq!(r[4].section, Some('B'));
        assert_eq!(r[4].size, Some(64));
        assert_eq!(r[4].bandwidth_mbs, Some(13.641));
        assert_eq!(r[4].figure, "AMMedium ping-pong roundtrip ReqRep");
        // A bandwidth wider than its column still parses.
        assert_eq!(r[5].size, Some(65000));
        assert_eq!(r[5].bandwidth_mbs, Some(2479.553));
        // Node prefix of jobs with more than two nodes.
        assert_eq!(r[6].figure, "AMLong flood one-way Req");
        assert_eq!(r[6].size, None);
        for i in [0, 2, 4] {
            assert_eq!(
                r[i].gasnet_line(),
                out.lines().nth(i + 3 + usize::from(i > 0)).unwrap()
            );
        }
    }

    #[test]
    fn barrier_and_raw_samples() {
        let out = "\
Total time:    0.027 sec  Avg Named Barrier latency:   13.601 us
Total time:    0.027 sec  Avg Anon. Barrier latency:   13.650 us
raw: udp pingpong 8 byte rtt 6.41 us
raw: udp pingpong 65000 byte rtt 13.20 us
raw: udp stream 1048576 byte 9267.0 MB/s
raw: shm flag pingpong rtt 0.110 us
raw: memcpy 1048576 byte 42000.0 MB/s
[1] raw: udp pingpong 8 byte rtt 7.00 us
";
        let r = parse_output(out).unwrap();
        assert_eq!(r.len(), 8);
        assert_eq!(r[0].kind, Kind::Barrier);
        assert_eq!(r[0].figure, "Named Barrier");
        assert_eq!(r[0].iters, None, "not printed, not guessed");
        assert_eq!(r[0].value, 13.601);
        assert_eq!(r[1].figure, "Anon. Barrier");
        assert_eq!(r[2].figure, "udp pingpong rtt");
        assert_eq!(r[2].size, Some(8));
        assert_eq!(r[2].value, 6.41);
        assert_eq!(r[3].size, Some(65000));
        assert_eq!(r[4].figure, "udp stream");
        assert_eq!(r[4].unit, Unit::MBps);
        assert_eq!(r[4].value, 9267.0);
        assert_eq!(r[5].figure, "shm flag pingpong rtt");
        assert_eq!(r[5].size, None);
        assert_eq!(r[6].figure, "memcpy");
        assert_eq!(r[7].value, 7.0);
        for (rec, line) in r.iter().zip(out.lines()).take(7) {
            assert_eq!(rec.gasnet_line(), line);
        }
    }

    #[test]
    fn malformed_measurements_are_errors_not_skips() {
        let e = parse_output(
            "ok\nA:  0 -   eight byte :    2000 iters, latency 1 us total, 1.0 us ave. (x)\n",
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                ParseError::Malformed {
                    line: 2,
                    what: "testsmall/testlarge",
                    ..
                }
            ),
            "{e}"
        );
        let e = parse_output("raw: udp pingpong 8 byte rtt fast us").unwrap_err();
        assert!(matches!(e, ParseError::Malformed { what: "raw", .. }));
        let e = parse_output("A:  AMShort ping-pong: x sec 1.0 us").unwrap_err();
        assert!(matches!(e, ParseError::Malformed { what: "testam", .. }));
        let e = parse_output("Total time: soon").unwrap_err();
        assert!(matches!(
            e,
            ParseError::Malformed {
                what: "barrier",
                ..
            }
        ));
        // Non-measurement lines are skipped.
        assert!(parse_output("MSG: done.\n\n max:\nx: lower-case\n")
            .unwrap()
            .is_empty());
    }
}
