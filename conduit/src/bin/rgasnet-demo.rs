//! A small rgasnet job: every rank greets every other rank with a Medium active message, the
//! handler replies with a Short one, and a Long message moves a block into a neighbour's
//! segment. Run it with `rgasnetrun -n 2 rgasnet-demo` (see the README).

use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rgasnet::{Category, Client, Handler, Token};

const HELLO: u8 = 128;
const ACK: u8 = 129;
const BLOCK: u8 = 130;
const DONE: u8 = 131;

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::init()?;
    let me = client.rank();
    let n = client.size();
    let acks = Arc::new(AtomicU32::new(0));
    let blocks = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicU32::new(0));
    let d = done.clone();
    let a = acks.clone();
    let b = blocks.clone();
    client.attach(
        1 << 20,
        vec![
            Handler::new("hello", Category::Medium, move |t: &Token, _args, payload| {
                println!(
                    "rank {me}: rank {} says {:?}",
                    t.source(),
                    String::from_utf8_lossy(payload)
                );
                if let Err(e) = t.reply_short(ACK, &[me]) {
                    eprintln!("rank {me}: reply failed: {e}");
                }
            })
            .at(HELLO),
            Handler::new("ack", Category::Short, move |_, _, _| {
                a.fetch_add(1, Ordering::Relaxed);
            })
            .at(ACK)
            .with_argc(1),
            Handler::new("block", Category::Long, move |t: &Token, args, payload| {
                let sum: u64 = payload.iter().map(|&x| u64::from(x)).sum();
                println!(
                    "rank {me}: {} bytes from rank {} landed at offset {} (checksum {sum}, sender's {})",
                    payload.len(),
                    t.source(),
                    t.long_offset().unwrap_or(0),
                    u64::from(args[0]) | (u64::from(args[1]) << 32)
                );
                b.fetch_add(1, Ordering::Relaxed);
            })
            .at(BLOCK)
            .with_argc(2),
            Handler::new("done", Category::Short, move |_, _, _| {
                d.fetch_add(1, Ordering::Relaxed);
            })
            .at(DONE),
        ],
    )?;
    for dest in 0..n {
        let text = format!("hello from rank {me} of {n}");
        client.am_request_medium(dest, HELLO, &[], text.as_bytes())?;
    }
    let data: Vec<u8> = (0..256 * 1024)
        .map(|i| (i * 7 + me as usize) as u8)
        .collect();
    let sum: u64 = data.iter().map(|&x| u64::from(x)).sum();
    client.am_request_long(
        (me + 1) % n,
        BLOCK,
        &[sum as u32, (sum >> 32) as u32],
        &data,
        4096,
    )?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while acks.load(Ordering::Relaxed) < n || blocks.load(Ordering::Relaxed) < 1 {
        if Instant::now() > deadline {
            return Err("timed out waiting for replies".into());
        }
        client.poll()?;
    }
    // Keep serving (other ranks may still need our replies) until every rank said it is done.
    for dest in 0..n {
        client.am_request_short(dest, DONE, &[])?;
    }
    while done.load(Ordering::Relaxed) < n {
        if Instant::now() > deadline {
            return Err("timed out waiting for the other ranks to finish".into());
        }
        client.poll()?;
    }
    client.bootstrap().barrier()?;
    println!("rank {me}: done");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rgasnet-demo: {e}");
            ExitCode::FAILURE
        }
    }
}
