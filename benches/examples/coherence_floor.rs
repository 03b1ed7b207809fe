//! What a shared-memory AM round trip costs this machine before any AM software runs: two
//! threads ping-pong through cache lines, as two processes' queues do, with the responder
//! spending a set number of `pause` instructions (a stand-in for its handler) between reading
//! the request and writing the reply.
//!
//! - *flag*: request and reply on one line, the reply written at once: the raw flag ping-pong
//!   that `testam`'s shared-memory target divides by;
//! - *mailbox*: the same line, the reply written after the delay (a design that carries the
//!   reply in place of the request);
//! - *two lines*: the request on one line, the reply on another (a design with a queue each
//!   way, as rgasnet's and GASNet's shared-memory AMs have), after the same delay.
//!
//! ```text
//! cargo run --release -p rgasnet-bench --example coherence_floor -- [MAX_PAUSES]
//! ```
//!
//! Prints, for each delay from 0 to `MAX_PAUSES` (default 3), the median round trip of each
//! design over 5 runs of 100,000 round trips, and its ratio to the flag ping-pong.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A word alone on its cache line.
#[repr(align(128))]
struct Line(AtomicU64);

/// Round trips per run (the first half warms up and is not timed).
const TRIPS: u64 = 200_000;

fn pauses(n: u32) {
    for _ in 0..n {
        spin_loop();
    }
}

/// Median nanoseconds per round trip of one design: `two_lines` puts the reply on a line of
/// its own; the responder pauses `delay` times before answering.
fn round_trip(two_lines: bool, delay: u32) -> f64 {
    let mut runs: Vec<f64> = (0..5).map(|_| one_run(two_lines, delay)).collect();
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

fn one_run(two_lines: bool, delay: u32) -> f64 {
    let lines = Arc::new([Line(AtomicU64::new(0)), Line(AtomicU64::new(0))]);
    let answer_line = usize::from(two_lines);
    let responder = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            // Requests are odd values 1, 3, ...; the answer to request r is r + 1.
            let mut last = 0;
            while last < 2 * TRIPS - 1 {
                // Acquire/Release: each side publishes its value with a release store and the
                // other reads it with an acquire load, as the queues' markers do.
                let r = lines[0].0.load(Ordering::Acquire);
                if r % 2 == 1 && r != last {
                    last = r;
                    pauses(delay);
                    lines[answer_line].0.store(r + 1, Ordering::Release);
                } else {
                    spin_loop();
                }
            }
        })
    };
    let mut start = Instant::now();
    for i in 0..TRIPS {
        if i == TRIPS / 2 {
            start = Instant::now();
        }
        let request = 2 * i + 1;
        lines[0].0.store(request, Ordering::Release);
        while lines[answer_line].0.load(Ordering::Acquire) != request + 1 {
            spin_loop();
        }
    }
    let elapsed = start.elapsed();
    if responder.join().is_err() {
        eprintln!("coherence_floor: the responder thread panicked");
        std::process::exit(1);
    }
    elapsed.as_nanos() as f64 / (TRIPS / 2) as f64
}

fn main() {
    let max_pauses: u32 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 3,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("coherence_floor: MAX_PAUSES must be a whole number: {e}");
            std::process::exit(2);
        }
    };
    let flag = round_trip(false, 0);
    let start = Instant::now();
    pauses(1_000_000);
    let pause_ns = start.elapsed().as_nanos() as f64 / 1e6;
    println!("flag ping-pong: {flag:.1} ns; one pause: {pause_ns:.1} ns");
    println!("pauses  mailbox ns  (x flag)  two lines ns  (x flag)");
    for delay in 0..=max_pauses {
        let mailbox = round_trip(false, delay);
        let two = round_trip(true, delay);
        println!(
            "{delay:>6}  {mailbox:>10.1}  ({:>6.2})  {two:>12.1}  ({:>6.2})",
            mailbox / flag,
            two / flag
        );
    }
}
