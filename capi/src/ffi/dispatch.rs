//! Calling C: the dispatch function that runs every AM's C handler (with its token current on
//! the thread, and a Long's payload copied to its C address first), and ending the job.

use std::ffi::c_void;
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicBool, Ordering};

use rgasnet::{Category, Token};

use super::{rgasnet_token, CURRENT, MEDIUM, RGASNET_AM_LONG, RGASNET_AM_MEDIUM, RGASNET_AM_SHORT};
use crate::state::{self, Job};

/// The C dispatch function and its context.
#[derive(Clone, Copy)]
pub(super) struct Dispatch {
    pub(super) f: unsafe extern "C" fn(
        *mut c_void,
        *const rgasnet_token,
        u8,
        i32,
        *const u32,
        u32,
        *mut c_void,
        usize,
    ),
    pub(super) ctx: usize,
}

impl Dispatch {
    /// Calls the C handler with `token` current.
    fn call(
        self,
        token: &Token<'_>,
        handler: u8,
        category: i32,
        args: &[u32],
        payload: *mut c_void,
        nbytes: usize,
    ) {
        let cell = rgasnet_token {
            token: (token as *const Token<'_>).cast::<Token<'static>>(),
        };
        let prev = CURRENT.with(|c| c.replace(&cell));
        // SAFETY: `f` is the dispatch function the C caller registered for exactly this call;
        // the pointers passed are valid for its duration (args: a live slice; payload: see the
        // callers; token: `cell`, alive until after the call).
        unsafe {
            (self.f)(
                self.ctx as *mut c_void,
                &cell,
                handler,
                category,
                args.as_ptr(),
                args.len() as u32,
                payload,
                nbytes,
            )
        };
        CURRENT.with(|c| c.set(prev));
    }

    pub(super) fn short_or_medium(
        self,
        token: &Token<'_>,
        category: Category,
        args: &[u32],
        payload: &[u8],
    ) {
        match category {
            Category::Short => self.call(
                token,
                token.handler(),
                RGASNET_AM_SHORT,
                args,
                std::ptr::null_mut(),
                0,
            ),
            // A Long to an open index cannot happen: Longs travel through the carrier.
            Category::Medium | Category::Long => self.medium(token, token.handler(), args, payload),
        }
    }

    /// The carrier of small Mediums: unpacks one from a Short's arguments.
    pub(super) fn small_medium(self, job: &Job, token: &Token<'_>, words: &[u32]) {
        let mut buf = [0u8; 64];
        let Some((handler, args, payload)) = state::unpack_small_medium(words, &mut buf) else {
            fatal(
                job,
                &format!("rank {} sent a malformed small Medium AM", token.source()),
            );
        };
        self.medium(token, handler, args, payload);
    }

    /// Calls a Medium's C handler with the payload in an 8-byte aligned buffer of its own.
    fn medium(self, token: &Token<'_>, handler: u8, args: &[u32], payload: &[u8]) {
        let words = payload.len().div_ceil(8);
        let run = |buf: &mut Vec<u64>| {
            // Grown once to the largest Medium seen, never cleared: the copy below overwrites
            // what the handler gets, so zeroing it per message would be a second pass.
            if buf.len() < words.max(1) {
                buf.resize(words.max(1), 0);
            }
            let p = buf.as_mut_ptr().cast::<u8>();
            // SAFETY: `buf` holds at least `payload.len()` bytes (words * 8), does not overlap
            // `payload`, and is exclusively borrowed here.
            unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), p, payload.len()) };
            self.call(
                token,
                handler,
                RGASNET_AM_MEDIUM,
                args,
                p.cast(),
                payload.len(),
            );
        };
        MEDIUM.with(|m| match m.try_borrow_mut() {
            Ok(mut buf) => run(&mut buf),
            Err(_) => run(&mut Vec::new()),
        });
    }

    /// The carrier of Longs: copies the data to its address (if this process serves it),
    /// then calls the C handler.
    pub(super) fn long(self, job: &Job, token: &Token<'_>, args: &[u32], body: &[u8]) {
        let Some((dest, handler, data)) = state::parse_long(body) else {
            fatal(
                job,
                &format!(
                    "rank {} sent a malformed Long AM ({} bytes)",
                    token.source(),
                    body.len()
                ),
            );
        };
        if !data.is_empty() {
            if !job.may_land(dest, data.len() as u64) || usize::try_from(dest).is_err() {
                fatal(job, &format!(
                    "rank {} sent a Long AM of {} bytes to address {dest:#x}, outside every segment this rank serves (rgasnet_segment_bind, rgasnet_am_serve_memory)",
                    token.source(), data.len()
                ));
            }
            // SAFETY: `[dest, dest + len)` lies inside memory this process registered with
            // rgasnet_segment_bind or rgasnet_am_serve_memory (checked just above), which the
            // C caller keeps mapped and writable while the job runs; `data` is rgasnet's
            // receive buffer, which cannot overlap it.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dest as *mut u8, data.len()) };
        }
        self.call(
            token,
            handler,
            RGASNET_AM_LONG,
            args,
            dest as *mut c_void,
            data.len(),
        );
    }
}

fn fatal(job: &Job, msg: &str) -> ! {
    eprintln!("rgasnet: fatal error on rank {}: {msg}", job.client.rank());
    exit_job(1)
}

/// Set by the first call that ends the job.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Ends the job with `code`, once. Ending runs the process's exit handlers, and a C runtime
/// registers its own exit among them (GASNet-EX does), which calls `rgasnet_exit` again: that
/// second call, or one from another thread meanwhile, leaves at once with `_exit`, since the
/// launcher already has the code.
pub(super) fn exit_job(code: i32) -> ! {
    // Relaxed: only one caller may win; nothing is published through the flag.
    if EXITING.swap(true, Ordering::Relaxed) {
        // SAFETY: fflush(NULL) flushes every C stream (no pointer involved); _exit ends the
        // process without running exit handlers again, which is the point.
        unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::_exit(code)
        }
    }
    // SAFETY: fflush(NULL) flushes every open C output stream, so that what the program
    // printed is not lost when the launcher stops the other ranks.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    let job = catch_unwind(state::job_if_any).ok().flatten();
    match job {
        Some(job) => job.client.exit(code),
        None => std::process::exit(code),
    }
}
