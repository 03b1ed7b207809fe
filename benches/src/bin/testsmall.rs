//! `testsmall`: GASNet's small-message put/get benchmark over rgasnet's extended API, started
//! by `rgasnetrun -n 2`. Rank 0 against rank 1, sizes doubling from 1 byte to 64 KiB:
//! A = blocking put and get latency, B = put and get throughput (nbi flood, then sync),
//! C = explicit-handle (nb) put and get latency. The raw UDP baselines are measured in the
//! same run; the closing `target:` lines hold the 8-byte put and get latencies (medians of
//! per-operation times) against the raw 8-byte UDP round trip.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use rgasnet_bench::opts::CommonOpts;
use rgasnet_bench::raw::{target_line, Goal};
use rgasnet_bench::record::Kind;
use rgasnet_bench::stats::{iters_for, median_duration, quantiles, size_sweep};
use rgasnet_bench::xbench::{op, timed, Xbench};

/// Largest size by default (GASNet's testsmall stops at small messages).
const MAX_SMALL: usize = 64 << 10;
/// Latency ratio asked for 8-byte put and get on the network path (put or get / raw UDP
/// round trip): issue 5 asked 1.25, issue 26 tightened it to 1.10 (the floor is 1.0).
const TARGET: f64 = 1.10;
/// Issue 6: an 8-byte put to a supernode peer takes at most this many nanoseconds.
const PSHM_PUT_NS: f64 = 5.0;

/// Put/get latency and small-message throughput (GASNet's testsmall).
#[derive(Parser, Debug)]
#[command(name = "testsmall", version, args_override_self = true)]
struct Cli {
    #[command(flatten)]
    common: CommonOpts,
    /// Also print, on standard error, the 50th, 90th, 99th and 99.9th percentiles and the mean
    /// of the 8-byte operations' individual times (a wait's tail shows here, not in medians).
    #[arg(long)]
    percentiles: bool,
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    let o = cli.common.resolved(3)?;
    let max = o.max_size_or(MAX_SMALL);
    let sizes: Vec<usize> = size_sweep(o.min_size.max(1), max)
        .iter()
        .map(|s| s.size)
        .collect();
    // Remote area at [max, 2 max) so that a one-rank job never copies a range onto itself.
    let mut x = Xbench::setup("testsmall", &o, 2 * max as u64)?;
    let (peer, remote) = (x.peer, max as u64);
    let n = |size: usize| iters_for(size, o.iters, o.byte_budget as u64, o.min_iters);
    let src: Vec<u8> = (0..max).map(|i| (i % 253) as u8).collect();
    let mut dst = vec![0u8; max];
    let mut medians: Vec<(&str, usize, Duration)> = Vec::new();
    // Average nanoseconds per operation, unrounded (a `Duration` divided by the count would
    // truncate to whole nanoseconds, a fifth of the 8-byte put target).
    let mut averages: Vec<(&str, usize, f64)> = Vec::new();
    // Warm-up, untimed.
    if x.sender {
        for _ in 0..o.iters.div_ceil(10) {
            op(|| "warm-up put".into(), x.ext.put(peer, remote, &src[..8]))?;
            op(
                || "warm-up get".into(),
                x.ext.get(&mut dst[..8], peer, remote),
            )?;
        }
    }
    x.barrier()?;
    for (sec, nb) in [('A', false), ('C', true)] {
        if !o.section_enabled(sec) {
            continue;
        }
        for &size in &sizes {
            for put in [true, false] {
                let iters = n(size);
                if x.sender {
                    let what = || format!("{} of {size} bytes", if put { "put" } else { "get" });
                    let (ext, s, d) = (&x.ext, &src[..size], &mut dst[..size]);
                    // One monomorphised loop per operation kind, the kind chosen outside it,
                    // as GASNet's loops are: a per-iteration dispatch through a closure cost
                    // as much as the 8-byte shared-memory put itself.
                    let (total, times) = match (put, nb) {
                        (true, false) => {
                            timed(iters, size == 8, what, || ext.put(peer, remote, s))?
                        }
                        (false, false) => {
                            timed(iters, size == 8, what, || ext.get(d, peer, remote))?
                        }
                        (true, true) => timed(iters, size == 8, what, || {
                            ext.put_nb(peer, remote, s).and_then(|h| h.wait())
                        })?,
                        (false, true) => timed(iters, size == 8, what, || {
                            ext.get_nb(d, peer, remote).and_then(|h| h.wait())
                        })?,
                    };
                    let figure = match (put, nb) {
                        (true, false) => "put latency",
                        (false, false) => "get latency",
                        (true, true) => "put_nb latency",
                        (false, true) => "get_nb latency",
                    };
                    x.latency(sec, figure, size, iters, total);
                    averages.push((
                        figure,
                        size,
                        total.as_secs_f64() * 1e9 / iters.max(1) as f64,
                    ));
                    if cli.percentiles && !times.is_empty() {
                        let q = quantiles(&times, &[0.5, 0.9, 0.99, 0.999]);
                        let mean = times.iter().sum::<Duration>() / times.len() as u32;
                        eprintln!(
                            "percentiles: {figure} {size} byte us p50 {:.3} p90 {:.3} p99 {:.3} p99.9 {:.3} mean {:.3}",
                            q[0].as_secs_f64() * 1e6,
                            q[1].as_secs_f64() * 1e6,
                            q[2].as_secs_f64() * 1e6,
                            q[3].as_secs_f64() * 1e6,
                            mean.as_secs_f64() * 1e6
                        );
                    }
                    if let Some(m) = median_duration(&times) {
                        medians.push((figure, size, m));
                    }
                }
                x.barrier()?;
            }
        }
        x.out.text("");
    }
    if o.section_enabled('B') {
        for &size in &sizes {
            for put in [true, false] {
                let iters = n(size);
                if x.sender {
                    let start = Instant::now();
                    let mut nbi = x.ext.nbi();
                    for _ in 0..iters {
                        let r = if put {
                            nbi.put_nbi(peer, remote, &src[..size])
                        } else {
                            nbi.get_nbi_to_segment(0, peer, remote, size as u64)
                        };
                        op(|| format!("nbi flood of {size} bytes"), r)?;
                    }
                    op(|| "sync_nbi_all".into(), nbi.sync_nbi_all())?;
                    let total = start.elapsed();
                    drop(nbi);
                    let figure = if put {
                        "put throughput"
                    } else {
                        "get throughput"
                    };
                    x.throughput(Kind::SmallThroughput, 'B', figure, size, iters, total);
                }
                x.barrier()?;
            }
        }
        x.out.text("");
    }
    if x.sender && x.on_pshm {
        // Nanosecond operations: the average of the timed loop, since timestamping each
        // operation would cost more than the operation.
        let label = "8 byte put latency ns (average) to a supernode peer";
        let line = match averages
            .iter()
            .find(|(f, s, _)| *f == "put latency" && *s == 8)
        {
            Some(&(_, _, ns)) => {
                let met = if ns <= PSHM_PUT_NS { "met" } else { "missed" };
                format!("target: {label} {ns:.1} (target <= {PSHM_PUT_NS} ns: {met})")
            }
            None => format!("target: {label}: not measured in this run"),
        };
        x.out.text(&line);
    } else if x.sender && !o.no_baseline {
        let raw = x
            .raw
            .rtt(8)
            .map(|d| ("raw udp 8 byte rtt us", d.as_secs_f64() * 1e6));
        for figure in ["put latency", "get latency"] {
            let label = format!("8 byte {figure} us (median)");
            let line = match medians.iter().find(|(f, s, _)| *f == figure && *s == 8) {
                Some((_, _, m)) => {
                    target_line(&label, m.as_secs_f64() * 1e6, raw, Goal::AtMost(TARGET))
                }
                None => format!("target: {label}: not measured in this run"),
            };
            x.out.text(&line);
        }
    }
    x.barrier().context("closing barrier")?;
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "testsmall: error: {}",
                rgasnet_launcher::error_chain(e.chain())
            );
            ExitCode::FAILURE
        }
    }
}
