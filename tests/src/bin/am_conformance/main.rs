//! Conformance program for the core AM layer, run by `tests/tests/am.rs` under `rgasnetrun`.
//!
//! `am_conformance MODE`: every mode checks its own results (values, payload bytes, counts,
//! error variants) and exits non-zero with a message naming the first mismatch.
//! Modes: `basic`, `flood`, `reqrep-flood`, `reply-storm`, `threads`, `stall`, `errors`,
//! `unregistered`, `exit`, `attach-and-wait`.
//!
//! `AMC_SEGMENT` sets the segment size; `AMC_FLOOD_COUNT` the requests each rank sends in
//! `reqrep-flood` (default 20,000; a slow Portals library gets fewer, see `ref_conduit.rs`).

// A test program: a poisoned lock means a handler already failed the run.
#![allow(clippy::unwrap_used)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rgasnet::{AmError, Category, Client, Handler, Token, MAX_LONG, MAX_MEDIUM};

mod floods;
mod leave;
mod unwind;

const SHORT_REQ: u8 = 128;
const SHORT_REP: u8 = 129;
const MED_REQ: u8 = 130;
const MED_REP: u8 = 131;
const LONG_REQ: u8 = 132;
const LONG_REP: u8 = 133;
const FLOOD: u8 = 134;
const FIXED_ARGC: u8 = 135;
const PROBE: u8 = 136;
const PROBE_REP: u8 = 137;
const DONE: u8 = 138;
const BIG_REPLY_REQ: u8 = 139;
const FLOOD_LONG: u8 = 140;
const SINK: u8 = 141;
/// [`SINK`] for Medium requests (`send-left` with `AMC_SEND_LEFT_BYTES`).
const SINK_MEDIUM: u8 = 143;
const MAYBE_MISSING: u8 = 200;
/// Every this many flood messages, one is a Long of [`FLOOD_LONG_LEN`] bytes instead of a
/// Medium: its data travels as several one-datagram puts that flow control may refuse and
/// the sender resend, piece by piece.
const FLOOD_LONG_EVERY: usize = 5;
const FLOOD_LONG_LEN: usize = 150_000;
/// Payload of the replies of `big_reply_req`.
const BIG_REPLY: usize = 60_000;

/// Bytes per (peer, direction) area of the segment in `basic`.
const LONG_SIZES: [usize; 5] = [0, 1, 8192, 65_536, MAX_LONG];
const ARG_AREA: u64 = 17 * 256;
const SLICE: u64 = ARG_AREA + (8192 + 65_536 + 4096 + MAX_LONG as u64);

fn arg_value(src: u32, argc: usize, i: usize) -> u32 {
    (src << 24) ^ ((argc as u32) << 16) ^ (i as u32).wrapping_mul(0x9e37) ^ 0x5a5a
}

fn pattern(src: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| {
            (j as u32)
                .wrapping_mul(131)
                .wrapping_add(src * 7 + len as u32) as u8
        })
        .collect()
}

/// Offset in `owner`'s segment where `peer`'s requests (or replies) land.
fn area(peer: u32, reply: bool) -> u64 {
    peer as u64 * 2 * SLICE + if reply { SLICE } else { 0 }
}

#[derive(Default)]
struct State {
    failures: Mutex<Vec<String>>,
    requests: AtomicU64,
    replies: AtomicU64,
    bytes_checked: AtomicU64,
    errors_seen: Mutex<Vec<String>>,
    seen: Mutex<Vec<Vec<bool>>>,
    done: AtomicU64,
    sunk: AtomicU64,
}

impl State {
    fn fail(&self, msg: String) {
        let mut f = self.failures.lock().unwrap();
        if f.len() < 20 {
            f.push(msg);
        }
    }
}

fn check_args(st: &State, what: &str, src: u32, args: &[u32]) {
    for (i, a) in args.iter().enumerate() {
        let want = arg_value(src, args.len(), i);
        if *a != want {
            st.fail(format!(
                "{what} from {src}: arg {i} of {} is {a:#x}, expected {want:#x}",
                args.len()
            ));
            return;
        }
    }
}

fn check_payload(st: &State, what: &str, src: u32, payload: &[u8]) {
    let want = pattern(src, payload.len());
    if let Some(j) = (0..payload.len()).find(|&j| payload[j] != want[j]) {
        st.fail(format!(
            "{what} from {src}: payload byte {j} of {} is {:#x}, expected {:#x}",
            payload.len(),
            payload[j],
            want[j]
        ));
    } else {
        st.bytes_checked
            .fetch_add(payload.len() as u64, Ordering::Relaxed);
    }
}

/// The handlers; `client` (for the handler that checks what handlers may not call) is left
/// out where the client's state must be dropped at the end: a handler holding a clone keeps
/// it alive.
fn handlers(st: &Arc<State>, me: u32, skip_missing: bool, client: Option<Client>) -> Vec<Handler> {
    let s = st.clone();
    let short_req = Handler::new("short_req", Category::Short, move |t: &Token, args, _| {
        check_args(&s, "short request", t.source(), args);
        s.requests.fetch_add(1, Ordering::Relaxed);
        let echo: Vec<u32> = (0..args.len())
            .map(|i| arg_value(me, args.len(), i))
            .collect();
        if let Err(e) = t.reply_short(SHORT_REP, &echo) {
            s.fail(format!("reply_short: {e}"));
        }
    })
    .at(SHORT_REQ);
    let s = st.clone();
    let short_rep = Handler::new("short_rep", Category::Short, move |t: &Token, args, _| {
        check_args(&s, "short reply", t.source(), args);
        if t.is_request() {
            s.fail("reply token says request".into());
        }
        s.replies.fetch_add(1, Ordering::Relaxed);
    })
    .at(SHORT_REP);
    let s = st.clone();
    let med_req = Handler::new("med_req", Category::Medium, move |t: &Token, args, p| {
        check_args(&s, "medium request", t.source(), args);
        check_payload(&s, "medium request", t.source(), p);
        s.requests.fetch_add(1, Ordering::Relaxed);
        let echo: Vec<u32> = (0..args.len())
            .map(|i| arg_value(me, args.len(), i))
            .collect();
        if let Err(e) = t.reply_medium(MED_REP, &echo, &pattern(me, p.len())) {
            s.fail(format!("reply_medium: {e}"));
        }
    })
    .at(MED_REQ);
    let s = st.clone();
    let med_rep = Handler::new("med_rep", Category::Medium, move |t: &Token, args, p| {
        check_args(&s, "medium reply", t.source(), args);
        check_payload(&s, "medium reply", t.source(), p);
        s.replies.fetch_add(1, Ordering::Relaxed);
    })
    .at(MED_REP);
    let s = st.clone();
    let long_req = Handler::new("long_req", Category::Long, move |t: &Token, args, p| {
        let src = t.source();
        check_args(&s, "long request", src, args);
        check_payload(&s, "long request", src, p);
        let off = t.long_offset().unwrap_or(u64::MAX);
        let base = area(src, false);
        if off < base || off >= base + SLICE {
            s.fail(format!(
                "long request from {src} at offset {off}, outside its area"
            ));
        }
        s.requests.fetch_add(1, Ordering::Relaxed);
        let echo: Vec<u32> = (0..args.len())
            .map(|i| arg_value(me, args.len(), i))
            .collect();
        // The reply lands in the requester's segment, in this rank's reply area, at the same
        // relative position.
        let rel = off - base;
        if let Err(e) = t.reply_long(LONG_REP, &echo, &pattern(me, p.len()), area(me, true) + rel) {
            s.fail(format!("reply_long: {e}"));
        }
    })
    .at(LONG_REQ);
    let s = st.clone();
    let long_rep = Handler::new("long_rep", Category::Long, move |t: &Token, args, p| {
        check_args(&s, "long reply", t.source(), args);
        check_payload(&s, "long reply", t.source(), p);
        s.replies.fetch_add(1, Ordering::Relaxed);
    })
    .at(LONG_REP);
    let flood_handler = |s: Arc<State>| {
        move |t: &Token, args: &[u32], p: &[u8]| {
            let (src, seq) = (t.source() as usize, args[0] as usize);
            check_payload(&s, "flood", t.source(), p);
            let mut seen = s.seen.lock().unwrap();
            match seen.get_mut(src).and_then(|v| v.get_mut(seq)) {
                Some(slot) if !*slot => *slot = true,
                Some(_) => s.fail(format!("flood message {seq} from {src} delivered twice")),
                None => s.fail(format!("flood message {seq} from {src} out of range")),
            }
            s.requests.fetch_add(1, Ordering::Relaxed);
        }
    };
    let flood = Handler::new("flood", Category::Medium, flood_handler(st.clone()))
        .at(FLOOD)
        .with_argc(1);
    let flood_long = Handler::new("flood_long", Category::Long, flood_handler(st.clone()))
        .at(FLOOD_LONG)
        .with_argc(1);
    let fixed = Handler::new("fixed_argc", Category::Short, |_, _, _| {})
        .at(FIXED_ARGC)
        .with_argc(2);

    let s = st.clone();
    let probe_rep = Handler::new("probe_rep", Category::Short, move |t: &Token, _, _| {
        let mut errs = s.errors_seen.lock().unwrap();
        match t.reply_short(SHORT_REP, &[]) {
            Err(AmError::ReplyFromReply) => errs.push("ReplyFromReply".into()),
            other => errs.push(format!("reply from reply handler gave {other:?}")),
        }
        s.replies.fetch_add(1, Ordering::Relaxed);
    })
    .at(PROBE_REP);
    let s = st.clone();
    let done = Handler::new("done", Category::Short, move |_, _, _| {
        s.done.fetch_add(1, Ordering::Relaxed);
    })
    .at(DONE);
    let s = st.clone();
    // A small request answered by a large reply: a rank's handlers fill the requester's reply
    // queue far faster than its request queue fills.
    let big_reply_req = Handler::new(
        "big_reply_req",
        Category::Short,
        move |t: &Token, args, _| {
            check_args(&s, "big-reply request", t.source(), args);
            s.requests.fetch_add(1, Ordering::Relaxed);
            let echo: Vec<u32> = (0..args.len())
                .map(|i| arg_value(me, args.len(), i))
                .collect();
            if let Err(e) = t.reply_medium(MED_REP, &echo, &pattern(me, BIG_REPLY)) {
                s.fail(format!("reply_medium: {e}"));
            }
        },
    )
    .at(BIG_REPLY_REQ);
    let s = st.clone();
    let sink = Handler::new("sink", Category::Short, move |_, _, _| {
        s.sunk.fetch_add(1, Ordering::Relaxed);
    })
    .at(SINK);
    let s = st.clone();
    let sink_medium = Handler::new("sink_medium", Category::Medium, move |_, _, _| {
        s.sunk.fetch_add(1, Ordering::Relaxed);
    })
    .at(SINK_MEDIUM);
    let mut v = vec![
        short_req,
        short_rep,
        med_req,
        med_rep,
        long_req,
        long_rep,
        flood,
        flood_long,
        fixed,
        probe_rep,
        done,
        big_reply_req,
        sink,
        sink_medium,
        unwind::handler(st),
    ];
    if let Some(client) = client {
        v.push(probe_handler(st, client));
    }
    if !skip_missing {
        v.push(Handler::new("maybe_missing", Category::Medium, |_, _, _| {}).at(MAYBE_MISSING));
    }
    v
}

/// A request handler that tries everything a handler may not do and records the errors.
fn probe_handler(st: &Arc<State>, client: Client) -> Handler {
    let s = st.clone();
    Handler::new("probe", Category::Short, move |t: &Token, _, _| {
        // Error checks from inside a request handler.
        let mut errs = s.errors_seen.lock().unwrap();
        match t.reply_short(PROBE_REP, &[]) {
            Ok(()) => {}
            Err(e) => errs.push(format!("first reply failed: {e}")),
        }
        match t.reply_short(PROBE_REP, &[]) {
            Err(AmError::AlreadyReplied) => errs.push("AlreadyReplied".into()),
            other => errs.push(format!("second reply gave {other:?}")),
        }
        match client.am_request_short(t.source(), SHORT_REQ, &[]) {
            Err(AmError::InHandler { .. }) => errs.push("RequestInHandler".into()),
            other => errs.push(format!("request from a handler gave {other:?}")),
        }
        match client.poll() {
            Err(AmError::InHandler { .. }) => errs.push("PollInHandler".into()),
            other => errs.push(format!("poll from a handler gave {other:?}")),
        }
        match client.quiesce(Duration::from_secs(1)) {
            Err(AmError::InHandler { call: "quiesce" }) => errs.push("QuiesceInHandler".into()),
            other => errs.push(format!("quiesce from a handler gave {other:?}")),
        }
    })
    .at(PROBE)
}

/// Polls until `done()` or the deadline; false on timeout.
fn poll_until(c: &Client, secs: u64, mut done: impl FnMut() -> bool) -> Result<bool, AmError> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        if Instant::now() > deadline {
            return Ok(false);
        }
        c.poll()?;
    }
    Ok(true)
}

fn args_for(me: u32, argc: usize) -> Vec<u32> {
    (0..argc).map(|i| arg_value(me, argc, i)).collect()
}

fn basic(c: &Client, st: &State) -> Result<(), String> {
    let me = c.rank();
    let n = c.size();
    let e = |e: AmError| e.to_string();
    // Every argument count x category, to every rank including this one.
    let mut sent = 0u64;
    for argc in 0..=16usize {
        let args = args_for(me, argc);
        for dest in 0..n {
            c.am_request_short(dest, SHORT_REQ, &args).map_err(e)?;
            c.am_request_medium(dest, MED_REQ, &args, &pattern(me, 100))
                .map_err(e)?;
            let off = area(me, false) + argc as u64 * 256;
            c.am_request_long(dest, LONG_REQ, &args, &pattern(me, 100), off)
                .map_err(e)?;
            sent += 3;
        }
        c.poll().map_err(e)?;
    }
    // Payload sizes, up to the maxima.
    for dest in 0..n {
        for len in [0usize, 1, 8192, MAX_MEDIUM] {
            c.am_request_medium(dest, MED_REQ, &args_for(me, 2), &pattern(me, len))
                .map_err(e)?;
            sent += 1;
        }
        let mut off = area(me, false) + ARG_AREA;
        for len in LONG_SIZES {
            c.am_request_long(dest, LONG_REQ, &args_for(me, 3), &pattern(me, len), off)
                .map_err(e)?;
            off += (len as u64).next_multiple_of(4096);
            sent += 1;
        }
        c.poll().map_err(e)?;
    }
    let ok = poll_until(c, 60, || st.replies.load(Ordering::Relaxed) >= sent).map_err(e)?;
    if !ok {
        return Err(format!(
            "only {} of {sent} replies arrived",
            st.replies.load(Ordering::Relaxed)
        ));
    }
    // Every rank sent the same number to every rank: wait until this rank handled them all.
    let ok = poll_until(c, 60, || st.requests.load(Ordering::Relaxed) >= sent).map_err(e)?;
    if !ok {
        return Err(format!(
            "only {} of {sent} requests arrived",
            st.requests.load(Ordering::Relaxed)
        ));
    }
    // Long payloads really are in the segment: check one request area byte by byte.
    let seg = c.segment().ok_or("no segment")?;
    for src in 0..n {
        let off = area(src, false) + ARG_AREA + 8192u64.next_multiple_of(4096) + 4096;
        let got = seg
            .to_vec(off as usize, 65_536)
            .map_err(|x| x.to_string())?;
        if got != pattern(src, 65_536) {
            return Err(format!(
                "Long payload from {src} is not in the segment at {off}"
            ));
        }
    }
    // Small Longs too (through shared memory they travel in the queue record, and the
    // receiver writes them into its segment): the 100-byte requests of every argument count.
    for src in 0..n {
        for argc in 0..=16u64 {
            let off = area(src, false) + argc * 256;
            let got = seg.to_vec(off as usize, 100).map_err(|x| x.to_string())?;
            if got != pattern(src, 100) {
                return Err(format!(
                    "100-byte Long payload from {src} is not in the segment at {off}"
                ));
            }
        }
    }
    println!(
        "rank {me}: basic ok: {sent} requests and replies, {} payload bytes checked",
        st.bytes_checked.load(Ordering::Relaxed)
    );
    Ok(())
}

fn threads(c: &Client, st: &Arc<State>, per_thread: u64) -> Result<(), String> {
    let n = c.size();
    let me = c.rank();
    // Every handler that can run meanwhile counts itself: the requests and replies, and the
    // `DONE` of a peer that finished first. No thread polls yet, so no handler is between its
    // own count and the client's.
    let counted = |st: &State| {
        st.requests.load(Ordering::Relaxed)
            + st.replies.load(Ordering::Relaxed)
            + st.done.load(Ordering::Relaxed)
    };
    let (handled_before, counted_before) = (c.stats().handled, counted(st));
    let mut joins = Vec::new();
    for t in 0..4u64 {
        let c = c.clone();
        joins.push(std::thread::spawn(move || -> Result<(), String> {
            for i in 0..per_thread {
                let dest = ((me as u64 + t + i) % n as u64) as u32;
                // Every fifth payload is large enough to be handed to its handler in place
                // in the receive block, which four pollers then give back concurrently.
                let len = if i % 5 == 0 {
                    4096 + (i % 3000)
                } else {
                    i % 300
                };
                c.am_request_medium(dest, MED_REQ, &args_for(me, 1), &pattern(me, len as usize))
                    .map_err(|e| e.to_string())?;
                if i % 16 == 0 {
                    c.poll().map_err(|e| e.to_string())?;
                }
            }
            Ok(())
        }));
    }
    for j in joins {
        j.join()
            .map_err(|_| "sender thread panicked".to_string())??;
    }
    let want = 4 * per_thread;
    // Four threads poll together until every reply and request arrived.
    let mut pollers = Vec::new();
    for _ in 0..4 {
        let c = c.clone();
        let st = st.clone();
        pollers.push(std::thread::spawn(move || {
            poll_until(&c, 120, || {
                st.replies.load(Ordering::Relaxed) >= want
                    && st.requests.load(Ordering::Relaxed) >= want
            })
            .map_err(|e| e.to_string())
        }));
    }
    for p in pollers {
        if !p.join().map_err(|_| "poller panicked".to_string())?? {
            return Err(format!(
                "threads: {} replies, {} requests of {want}",
                st.replies.load(Ordering::Relaxed),
                st.requests.load(Ordering::Relaxed)
            ));
        }
    }
    // Every poller returned, so every handler run is over and counted on both sides: the
    // client's count (on the shared-memory path a plain load and store under the receiver's
    // lock, whichever of the four pollers holds it) must match, none lost or counted twice.
    let handled = c.stats().handled - handled_before;
    let ran = counted(st) - counted_before;
    if handled != ran {
        return Err(format!(
            "threads: the client counted {handled} handlers run, the handlers {ran}"
        ));
    }
    println!("rank {me}: threads ok: {want} requests and replies over 4 threads");
    Ok(())
}

fn errors(c: &Client, st: &State) -> Result<(), String> {
    let me = c.rank();
    let n = c.size();
    let seg = c.segment_size((me + 1) % n).ok_or("no segment size")?;
    let mut problems = Vec::new();
    let mut expect = |what: &str, r: Result<(), AmError>, ok: fn(&AmError) -> bool| match r {
        Err(ref e) if ok(e) => {}
        other => problems.push(format!("{what}: got {other:?}")),
    };
    expect("unregistered", c.am_request_short(0, 250, &[]), |e| {
        matches!(e, AmError::UnregisteredHandler { handler: 250, .. })
    });
    expect(
        "wrong argc",
        c.am_request_short(0, FIXED_ARGC, &[1, 2, 3]),
        |e| {
            matches!(
                e,
                AmError::WrongArgCount {
                    expected: 2,
                    given: 3,
                    ..
                }
            )
        },
    );
    expect(
        "wrong category",
        c.am_request_medium(0, SHORT_REQ, &[], b"x"),
        |e| matches!(e, AmError::WrongCategory { .. }),
    );
    expect(
        "too many args",
        c.am_request_short(0, SHORT_REQ, &[0; 17]),
        |e| matches!(e, AmError::TooManyArgs { given: 17, .. }),
    );
    expect(
        "medium too large",
        c.am_request_medium(0, MED_REQ, &[], &vec![0; MAX_MEDIUM + 1]),
        |e| matches!(e, AmError::PayloadTooLarge { .. }),
    );
    expect(
        "long too large",
        c.am_request_long(0, LONG_REQ, &[], &vec![0; MAX_LONG + 1], 0),
        |e| matches!(e, AmError::PayloadTooLarge { .. }),
    );
    expect(
        "long outside segment",
        c.am_request_long((me + 1) % n, LONG_REQ, &[], &[0; 16], seg - 8),
        |e| matches!(e, AmError::OutsideSegment { .. }),
    );
    expect("bad rank", c.am_request_short(n, SHORT_REQ, &[]), |e| {
        matches!(e, AmError::BadRank { .. })
    });
    // Handler-side rules.
    c.am_request_short((me + 1) % n, PROBE, &[])
        .map_err(|e| e.to_string())?;
    let ok = poll_until(c, 30, || st.errors_seen.lock().unwrap().len() >= 5)
        .map_err(|e| e.to_string())?;
    if !ok {
        problems.push("handler-side checks did not all run".into());
    }
    let mut seen = st.errors_seen.lock().unwrap().clone();
    seen.sort();
    let want = [
        "AlreadyReplied",
        "PollInHandler",
        "QuiesceInHandler",
        "ReplyFromReply",
        "RequestInHandler",
    ];
    // The prober's own first reply is not recorded; its reply handler records one entry.
    if seen.iter().any(|s| !want.contains(&s.as_str())) || seen.len() != 5 {
        problems.push(format!("handler-side checks: {seen:?}"));
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    println!("rank {me}: errors ok");
    Ok(())
}

/// A mode that takes the client and ends by dropping it (see `leave`).
type EndingMode = fn(Client, &State) -> Result<(), String>;

/// Milliseconds since the Unix epoch (the failure-timing tests compare it with the launcher's end).
fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "basic".into());
    let c = match Client::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("am_conformance: init: {e}");
            return ExitCode::from(2);
        }
    };
    let me = c.rank();
    let st = Arc::new(State::default());
    let skip = mode == "unregistered" && me == 1;
    let n = c.size() as u64;
    let seg = match std::env::var("AMC_SEGMENT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        Some(s) => s,
        None => 2 * SLICE * n,
    };
    // The modes that end by dropping the client must not keep its state alive from a handler.
    let prober = (!matches!(mode.as_str(), "leave" | "send-left" | "undrained")).then(|| c.clone());
    if let Err(e) = c.attach(seg, handlers(&st, me, skip, prober)) {
        eprintln!("am_conformance: rank {me}: attach: {e}");
        return ExitCode::from(2);
    }
    // Modes that end by dropping the client (no closing handshake: each rank's end must
    // still deliver, take in or refuse what it should).
    let ending: Option<EndingMode> = match mode.as_str() {
        "leave" => Some(leave::leave),
        "send-left" => Some(leave::send_left),
        "undrained" => Some(leave::undrained),
        _ => None,
    };
    if let Some(run) = ending {
        return match run(c, &st) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("am_conformance: rank {me}: {mode} FAILED: {e}");
                ExitCode::from(1)
            }
        };
    }
    let r = match mode.as_str() {
        "basic" => basic(&c, &st),
        "flood" => floods::flood(&c, &st, 1000),
        "reqrep-flood" => {
            let count = match std::env::var("AMC_FLOOD_COUNT") {
                Ok(v) => match v.parse::<u64>() {
                    Ok(n) if n > 0 => n,
                    _ => {
                        eprintln!("am_conformance: AMC_FLOOD_COUNT={v} is not a positive count");
                        return ExitCode::from(2);
                    }
                },
                Err(_) => 20_000,
            };
            floods::request_flood(&c, &st, count, SHORT_REQ, "request/reply flood")
        }
        // Short requests answered by large Medium replies: each rank's handlers find the
        // other's reply queue full while the other is inside handlers too, and neither may
        // wait for the other there.
        "reply-storm" => floods::request_flood(&c, &st, 300, BIG_REPLY_REQ, "reply storm"),
        "threads" => threads(&c, &st, 500),
        "rewind" => floods::rewind(&c, &st),
        "stall" => floods::stall(&c, &st, 3000, Duration::from_millis(2500)),
        "errors" => errors(&c, &st),
        "unwind" => unwind::unwind(&c, &st),
        "unregistered" => {
            if me == 0 {
                let _ = c.am_request_medium(1, MAYBE_MISSING, &[], b"who handles this?");
            }
            // Rank 1 dies with a diagnostic when the message arrives; keep polling until then.
            let _ = poll_until(&c, 20, || false);
            Err("the unregistered handler was never reported".into())
        }
        "exit" => {
            // `exit [RANK CODE]`: RANK (default the last) ends the job with CODE (default 7).
            let arg = |i: usize| std::env::args().nth(i).and_then(|a| a.parse::<i64>().ok());
            let who = arg(2).map_or(n as u32 - 1, |r| r as u32);
            let code = arg(3).map_or(7, |c| c as i32);
            if me == who {
                println!("EXITING_AT_MS={}", now_ms());
                c.exit(code);
            }
            let _ = poll_until(&c, 20, || false);
            Err(format!("exit({code}) on rank {who} did not end the job"))
        }
        "stopped-peer" => leave::stopped_peer(&c),
        "topology" => {
            // What the launcher and the conduit made of the job, for comparing launchers.
            println!(
                "rank {me}/{n} host_ranks={:?} supernode={:?}",
                c.host_ranks(),
                c.supernode()
            );
            Ok(())
        }
        "attach-and-wait" => {
            // For the crash tests: report, then serve until killed.
            println!(
                "attached rank {me} pid {} key {:016x}",
                std::process::id(),
                c.bootstrap().job_key()
            );
            let _ = poll_until(&c, 60, || false);
            Err("was not killed".into())
        }
        other => Err(format!("unknown mode {other}")),
    };
    let failures = st.failures.lock().unwrap().clone();
    let r = r.and_then(|()| {
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n"))
        }
    });
    // Nobody leaves while others may still need its replies: tell everyone we are done and
    // keep serving until everyone is.
    for dest in 0..c.size() {
        if let Err(e) = c.am_request_short(dest, DONE, &[]) {
            eprintln!("am_conformance: rank {me}: done message: {e}");
        }
    }
    let _ = poll_until(&c, 60, || st.done.load(Ordering::Relaxed) >= n);
    if let Err(e) = c.bootstrap().barrier() {
        eprintln!("am_conformance: rank {me}: final barrier: {e}");
    }
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("am_conformance: rank {me}: {mode} FAILED: {e}");
            ExitCode::from(1)
        }
    }
}
