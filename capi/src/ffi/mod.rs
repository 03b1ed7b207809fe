//! The `extern "C"` functions and, with `dispatch`, the crate's only `unsafe`: C pointers
//! become slices and regions here, C handlers are called here, and Long payloads are copied
//! to their C address here. Every function catches panics ([`guard`]) and checks its
//! pointers, tokens and handles before using them; the safe work happens in `state`.
#![allow(unsafe_code)]
#![allow(non_camel_case_types)]

mod dispatch;

use dispatch::{exit_job, Dispatch};
use rgasnet_pshm::ExternalMemory;

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use rgasnet::{Category, Handler, OpenHandlerFn, Token};
use rgasnet_portals::Region;

use crate::state::{self, RGASNET_AM_MAX_ARGS, RGASNET_AM_MAX_LONG, RGASNET_AM_MAX_MEDIUM};
use crate::status::*;

/// AM category of a Short (arguments only).
pub const RGASNET_AM_SHORT: i32 = 0;
/// AM category of a Medium (payload in a buffer valid for the handler's call).
pub const RGASNET_AM_MEDIUM: i32 = 1;
/// AM category of a Long (payload already at its destination address).
pub const RGASNET_AM_LONG: i32 = 2;

/// An AM handler's token: opaque to C, valid only during the handler call it was passed to.
pub struct rgasnet_token {
    token: *const Token<'static>,
}

/// An explicit-handle operation; [`RGASNET_HANDLE_DONE`](crate::RGASNET_HANDLE_DONE) (0)
/// when it completed at once.
pub type rgasnet_handle = u64;

/// Called for every AM that arrives, inside `rgasnet_poll` (or any call that polls):
/// `category` is an `RGASNET_AM_*`, `handler` the index the sender named. Short: `payload`
/// NULL, `nbytes` 0. Medium: `payload` is 8-byte aligned, writable, valid until the call
/// returns. Long: `payload` is the destination address in this process, where the bytes
/// already are. The handler may reply once through `token` (requests only).
pub type rgasnet_am_dispatch_fn = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        token: *const rgasnet_token,
        handler: u8,
        category: i32,
        args: *const u32,
        nargs: u32,
        payload: *mut c_void,
        nbytes: usize,
    ),
>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    /// The token of the handler running on this thread (null outside handlers).
    static CURRENT: Cell<*const rgasnet_token> = const { Cell::new(std::ptr::null()) };
    /// Medium payloads are handed to C from here: 8-byte aligned and C's to write.
    static MEDIUM: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs `f`, turning its error or panic into a status code and a message.
fn guard(call: &'static str, f: impl FnOnce() -> Result<(), CError>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => RGASNET_OK,
        Ok(Err(e)) => {
            set_last_error(&e.message);
            e.code
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!(
                "{call}: internal error in rgasnet (please report): {what}"
            ));
            RGASNET_ERR_INTERNAL
        }
    }
}

fn bad_arg(call: &str, what: &str) -> CError {
    CError::new(RGASNET_ERR_BAD_ARG, format!("{call}: {what}"))
}

/// `n` bytes at `p` (NULL allowed only for 0 bytes).
fn bytes<'a>(call: &str, p: *const c_void, n: usize) -> Result<&'a [u8], CError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(bad_arg(call, "the source buffer is NULL"));
    }
    if isize::try_from(n).is_err() {
        return Err(bad_arg(call, "the length is larger than the address space"));
    }
    // SAFETY: the C caller passes `n` readable bytes at `p` (the documented contract of every
    // call taking a source buffer); `p` is non-null and `n` fits isize, as from_raw_parts
    // requires. The bytes are only read, and only during this call.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) })
}

/// `n` writable bytes at `p`, borrowed for as long as the caller promises to leave them alone.
fn bytes_mut<'a>(call: &str, p: *mut c_void, n: usize) -> Result<&'a mut [u8], CError> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(bad_arg(call, "the destination buffer is NULL"));
    }
    if isize::try_from(n).is_err() {
        return Err(bad_arg(call, "the length is larger than the address space"));
    }
    // SAFETY: the C caller passes `n` writable bytes at `p` and does not touch them until the
    // operation completes (blocking: this call; nb: the handle's completion; nbi: the sync),
    // the documented contract of every get; non-null and fits isize as required.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), n) })
}

fn args<'a>(call: &str, p: *const u32, n: u32) -> Result<&'a [u32], CError> {
    if n as usize > RGASNET_AM_MAX_ARGS {
        return Err(CError::new(
            RGASNET_ERR_TOO_LARGE,
            format!("{call}: {n} arguments exceed the maximum of {RGASNET_AM_MAX_ARGS}"),
        ));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(bad_arg(call, "nargs > 0 but args is NULL"));
    }
    // SAFETY: the caller passes `n` (at most 16) readable u32 at `p`, non-null; read only
    // during this call.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

fn out<T>(call: &str, p: *mut T, v: T) -> Result<(), CError> {
    if p.is_null() {
        return Err(bad_arg(call, "the output pointer is NULL"));
    }
    // SAFETY: non-null, and the caller passes a pointer to a writable `T`.
    unsafe { p.write(v) };
    Ok(())
}

/// The Rust token behind `token`, if it is the token of the handler running on this thread.
fn with_token<R>(
    call: &str,
    token: *const rgasnet_token,
    f: impl FnOnce(&Token<'_>) -> Result<R, CError>,
) -> Result<R, CError> {
    let current = CURRENT.with(Cell::get);
    if token.is_null() || token != current {
        return Err(bad_arg(
            call,
            "the token is not the one of the handler running on this thread (tokens are valid only during their handler's call)",
        ));
    }
    // SAFETY: `token` equals CURRENT, which `call_handler` sets to a cell on its own stack for
    // exactly the duration of the C handler's call (and restores afterwards), so the cell and
    // the Rust token it points to are alive.
    let t = unsafe { &*(*token).token };
    f(t)
}

/// The message of the last failing call on this thread ("" if none). Valid until the next
/// failing call on this thread.
#[no_mangle]
pub extern "C" fn rgasnet_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Joins the job started by `rgasnetrun` (a second call returns `RGASNET_OK` at once).
#[no_mangle]
pub extern "C" fn rgasnet_init() -> i32 {
    guard("rgasnet_init", state::init)
}

/// This rank (0 before init).
#[no_mangle]
pub extern "C" fn rgasnet_rank() -> u32 {
    state::job_if_any().map_or(0, |j| j.client.rank())
}

/// Ranks in the job (0 before init).
#[no_mangle]
pub extern "C" fn rgasnet_size() -> u32 {
    state::job_if_any().map_or(0, |j| j.client.size())
}

/// Collective over all ranks: returns when all have entered.
#[no_mangle]
pub extern "C" fn rgasnet_boot_barrier() -> i32 {
    guard("rgasnet_boot_barrier", || {
        Ok(state::job("rgasnet_boot_barrier")?
            .client
            .bootstrap()
            .barrier()?)
    })
}

/// Collective: every rank's `len` bytes at `src`, in rank order, into `dest` (size * len bytes).
#[no_mangle]
pub extern "C" fn rgasnet_boot_allgather(src: *const c_void, len: usize, dest: *mut c_void) -> i32 {
    const CALL: &str = "rgasnet_boot_allgather";
    guard(CALL, || {
        let job = state::job(CALL)?;
        let mine = bytes(CALL, src, len)?;
        let total = len
            .checked_mul(job.client.size() as usize)
            .ok_or_else(|| bad_arg(CALL, "len * size overflows"))?;
        let dest = bytes_mut(CALL, dest, total)?;
        let all = job.client.bootstrap().allgather(mine)?;
        for (rank, (chunk, got)) in dest.chunks_mut(len.max(1)).zip(&all).enumerate() {
            if got.len() != len {
                return Err(CError::new(
                    RGASNET_ERR_BOOTSTRAP,
                    format!("{CALL}: rank {rank} contributed {} bytes, this rank {len}; every rank must pass the same len", got.len()),
                ));
            }
            chunk.copy_from_slice(got);
        }
        Ok(())
    })
}

/// Collective: `len` bytes at `src` on `root` into `dest` on every rank (`src` is read on
/// `root` only).
#[no_mangle]
pub extern "C" fn rgasnet_boot_broadcast(
    root: u32,
    src: *const c_void,
    len: usize,
    dest: *mut c_void,
) -> i32 {
    const CALL: &str = "rgasnet_boot_broadcast";
    guard(CALL, || {
        let job = state::job(CALL)?;
        let boot = job.client.bootstrap();
        if root >= job.client.size() {
            return Err(CError::new(
                RGASNET_ERR_BAD_RANK,
                format!(
                    "{CALL}: root {root} is not in this job of {} ranks",
                    job.client.size()
                ),
            ));
        }
        let data = if boot.rank() == root {
            Some(bytes(CALL, src, len)?)
        } else {
            None
        };
        let got = boot.broadcast(root, data)?;
        if got.len() != len {
            return Err(CError::new(
                RGASNET_ERR_BOOTSTRAP,
                format!(
                    "{CALL}: the root sent {} bytes, this rank expects {len}",
                    got.len()
                ),
            ));
        }
        bytes_mut(CALL, dest, len)?.copy_from_slice(&got);
        Ok(())
    })
}

/// Collective: sets up the AM layer. `dispatch` gets every AM (see [`rgasnet_am_dispatch_fn`]);
/// `ctx` is passed back to it.
#[no_mangle]
pub extern "C" fn rgasnet_am_attach(dispatch: rgasnet_am_dispatch_fn, ctx: *mut c_void) -> i32 {
    const CALL: &str = "rgasnet_am_attach";
    guard(CALL, || {
        let job = state::job(CALL)?;
        let f = dispatch.ok_or_else(|| bad_arg(CALL, "the dispatch function is NULL"))?;
        let d = Dispatch {
            f,
            ctx: ctx as usize,
        };
        let open: OpenHandlerFn =
            Arc::new(move |t: &Token<'_>, c, a: &[u32], p: &[u8]| d.short_or_medium(t, c, a, p));
        let long = Handler::new(
            "rgasnet C ABI Long carrier",
            Category::Medium,
            move |t, a, p| d.long(job, t, a, p),
        );
        let small = Handler::new(
            "rgasnet C ABI small Medium carrier",
            Category::Short,
            move |t, a, _| d.small_medium(job, t, a),
        );
        job.am_attach(open, long, small)
    })
}

/// Most arguments of an AM (16).
#[no_mangle]
pub extern "C" fn rgasnet_am_max_args() -> usize {
    RGASNET_AM_MAX_ARGS
}

/// Largest Medium payload.
#[no_mangle]
pub extern "C" fn rgasnet_am_max_medium() -> usize {
    RGASNET_AM_MAX_MEDIUM
}

/// Largest Long payload.
#[no_mangle]
pub extern "C" fn rgasnet_am_max_long() -> usize {
    RGASNET_AM_MAX_LONG
}

/// An AM as C passes it: pointers not yet checked.
struct RawAm {
    handler: u8,
    category: Category,
    args: *const u32,
    nargs: u32,
    src: *const c_void,
    nbytes: usize,
    dest: u64,
}

impl RawAm {
    fn short(handler: u8, args: *const u32, nargs: u32) -> RawAm {
        RawAm::new(
            handler,
            Category::Short,
            args,
            nargs,
            std::ptr::null(),
            0,
            0,
        )
    }

    fn new(
        handler: u8,
        category: Category,
        args: *const u32,
        nargs: u32,
        src: *const c_void,
        nbytes: usize,
        dest: u64,
    ) -> RawAm {
        RawAm {
            handler,
            category,
            args,
            nargs,
            src,
            nbytes,
            dest,
        }
    }

    fn checked(&self, call: &str) -> Result<state::AmMessage<'_>, CError> {
        Ok(state::AmMessage {
            handler: self.handler,
            category: self.category,
            args: args(call, self.args, self.nargs)?,
            payload: bytes(call, self.src, self.nbytes)?,
            dest: self.dest,
        })
    }
}

fn request(call: &'static str, rank: u32, am: RawAm) -> i32 {
    guard(call, || {
        state::job(call)?.request(call, rank, am.checked(call)?)
    })
}

/// Sends a Short request to run `handler` on `rank`.
#[no_mangle]
pub extern "C" fn rgasnet_am_request_short(
    rank: u32,
    handler: u8,
    args: *const u32,
    nargs: u32,
) -> i32 {
    request(
        "rgasnet_am_request_short",
        rank,
        RawAm::short(handler, args, nargs),
    )
}

/// Sends a Medium request; `src` may be reused on return.
#[no_mangle]
pub extern "C" fn rgasnet_am_request_medium(
    rank: u32,
    handler: u8,
    args: *const u32,
    nargs: u32,
    src: *const c_void,
    nbytes: usize,
) -> i32 {
    request(
        "rgasnet_am_request_medium",
        rank,
        RawAm::new(handler, Category::Medium, args, nargs, src, nbytes, 0),
    )
}

/// Sends a Long request: the bytes land at `dest_addr` of `rank` before its handler runs;
/// `src` may be reused on return.
#[no_mangle]
pub extern "C" fn rgasnet_am_request_long(
    rank: u32,
    handler: u8,
    args: *const u32,
    nargs: u32,
    src: *const c_void,
    nbytes: usize,
    dest_addr: u64,
) -> i32 {
    request(
        "rgasnet_am_request_long",
        rank,
        RawAm::new(handler, Category::Long, args, nargs, src, nbytes, dest_addr),
    )
}

fn reply(call: &'static str, token: *const rgasnet_token, am: RawAm) -> i32 {
    guard(call, || {
        let msg = am.checked(call)?;
        with_token(call, token, |t| state::reply(call, t, msg))
    })
}

/// Replies with a Short from a request handler.
#[no_mangle]
pub extern "C" fn rgasnet_am_reply_short(
    token: *const rgasnet_token,
    handler: u8,
    args: *const u32,
    nargs: u32,
) -> i32 {
    reply(
        "rgasnet_am_reply_short",
        token,
        RawAm::short(handler, args, nargs),
    )
}

/// Replies with a Medium from a request handler.
#[no_mangle]
pub extern "C" fn rgasnet_am_reply_medium(
    token: *const rgasnet_token,
    handler: u8,
    args: *const u32,
    nargs: u32,
    src: *const c_void,
    nbytes: usize,
) -> i32 {
    reply(
        "rgasnet_am_reply_medium",
        token,
        RawAm::new(handler, Category::Medium, args, nargs, src, nbytes, 0),
    )
}

/// Replies with a Long from a request handler (the bytes land at `dest_addr` of the requester).
#[no_mangle]
pub extern "C" fn rgasnet_am_reply_long(
    token: *const rgasnet_token,
    handler: u8,
    args: *const u32,
    nargs: u32,
    src: *const c_void,
    nbytes: usize,
    dest_addr: u64,
) -> i32 {
    reply(
        "rgasnet_am_reply_long",
        token,
        RawAm::new(handler, Category::Long, args, nargs, src, nbytes, dest_addr),
    )
}

/// The rank that sent the message of `token`.
#[no_mangle]
pub extern "C" fn rgasnet_token_source(token: *const rgasnet_token, rank_out: *mut u32) -> i32 {
    const CALL: &str = "rgasnet_token_source";
    guard(CALL, || {
        let r = with_token(CALL, token, |t| Ok(t.source()))?;
        out(CALL, rank_out, r)
    })
}

/// Whether the message of `token` is a request (1) or a reply (0).
#[no_mangle]
pub extern "C" fn rgasnet_token_is_request(
    token: *const rgasnet_token,
    is_req_out: *mut i32,
) -> i32 {
    const CALL: &str = "rgasnet_token_is_request";
    guard(CALL, || {
        let r = with_token(CALL, token, |t| Ok(i32::from(t.is_request())))?;
        out(CALL, is_req_out, r)
    })
}

/// Runs pending handlers and completes operations; never blocks.
#[no_mangle]
pub extern "C" fn rgasnet_poll() -> i32 {
    guard("rgasnet_poll", || state::job("rgasnet_poll")?.poll())
}

/// Lets Long AMs land in `[addr, addr + len)` of this process, besides the bound segment.
#[no_mangle]
pub extern "C" fn rgasnet_am_serve_memory(addr: *mut c_void, len: usize) -> i32 {
    const CALL: &str = "rgasnet_am_serve_memory";
    guard(CALL, || {
        if addr.is_null() && len > 0 {
            return Err(bad_arg(CALL, "addr is NULL"));
        }
        state::job(CALL)?.serve(addr as u64, len as u64)
    })
}

/// Collective, once: serves `[addr, addr + len)` of this process to put, get and Long AMs,
/// and learns every rank's segment. `addr` 8-byte aligned, `len` a multiple of 8; the memory
/// stays mapped while the job runs.
#[no_mangle]
pub extern "C" fn rgasnet_segment_bind(addr: *mut c_void, len: usize) -> i32 {
    const CALL: &str = "rgasnet_segment_bind";
    guard(CALL, || {
        let job = state::job(CALL)?;
        // An empty segment serves nothing, whatever its address.
        let base = if len == 0 {
            std::ptr::null_mut()
        } else {
            addr.cast::<u8>()
        };
        // SAFETY: rgasnet_segment_bind's contract: the caller's `len` bytes at `addr` stay
        // mapped, readable and writable while the job runs, and the program reaches them only
        // through C pointers; `new` checks alignment, length and wrap-around.
        let memory = unsafe { ExternalMemory::new(base, len) }.ok_or_else(|| {
            bad_arg(
                CALL,
                "the segment must start on an 8-byte boundary, be a multiple of 8 bytes long and not wrap around the address space",
            )
        })?;
        let region = Region::with_memory(Box::new(memory), len).ok_or_else(|| {
            CError::new(
                RGASNET_ERR_INTERNAL,
                format!("{CALL}: region shorter than its memory"),
            )
        })?;
        job.segment_bind(region, addr as u64)
    })
}

/// `rank`'s bound segment: its address in that rank's process and its length.
#[no_mangle]
pub extern "C" fn rgasnet_segment_query(rank: u32, addr_out: *mut u64, len_out: *mut u64) -> i32 {
    const CALL: &str = "rgasnet_segment_query";
    guard(CALL, || {
        let (a, l) = state::job(CALL)?.segment_of(rank)?;
        out(CALL, addr_out, a)?;
        out(CALL, len_out, l)
    })
}

/// Blocking put of `nbytes` at `src` to `dest_addr` in `rank`'s segment.
#[no_mangle]
pub extern "C" fn rgasnet_put(rank: u32, dest_addr: u64, src: *const c_void, nbytes: usize) -> i32 {
    const CALL: &str = "rgasnet_put";
    guard(CALL, || {
        state::job(CALL)?.put(rank, dest_addr, bytes(CALL, src, nbytes)?)
    })
}

/// Blocking get of `nbytes` at `src_addr` in `rank`'s segment into `dest`.
#[no_mangle]
pub extern "C" fn rgasnet_get(dest: *mut c_void, rank: u32, src_addr: u64, nbytes: usize) -> i32 {
    const CALL: &str = "rgasnet_get";
    guard(CALL, || {
        let job = state::job(CALL)?;
        if !dest.is_null() {
            if let Some(r) = job.get_to_own_segment(rank, src_addr, dest as u64, nbytes) {
                return r;
            }
        }
        job.get(bytes_mut(CALL, dest, nbytes)?, rank, src_addr)
    })
}

/// Explicit-handle put (`src` may be reused on return); the handle goes to `*out`.
#[no_mangle]
pub extern "C" fn rgasnet_put_nb(
    rank: u32,
    dest_addr: u64,
    src: *const c_void,
    nbytes: usize,
    handle_out: *mut rgasnet_handle,
) -> i32 {
    const CALL: &str = "rgasnet_put_nb";
    guard(CALL, || {
        if handle_out.is_null() {
            return Err(bad_arg(CALL, "the handle pointer is NULL"));
        }
        let h = state::job(CALL)?.put_nb(rank, dest_addr, bytes(CALL, src, nbytes)?)?;
        out(CALL, handle_out, h)
    })
}

/// Explicit-handle get (`dest` untouched by the caller until completion).
#[no_mangle]
pub extern "C" fn rgasnet_get_nb(
    dest: *mut c_void,
    rank: u32,
    src_addr: u64,
    nbytes: usize,
    handle_out: *mut rgasnet_handle,
) -> i32 {
    const CALL: &str = "rgasnet_get_nb";
    guard(CALL, || {
        if handle_out.is_null() {
            return Err(bad_arg(CALL, "the handle pointer is NULL"));
        }
        let job = state::job(CALL)?;
        if !dest.is_null() {
            if let Some(h) = job.get_nb_to_own_segment(rank, src_addr, dest as u64, nbytes) {
                return out(CALL, handle_out, h?);
            }
        }
        let h = job.get_nb(bytes_mut(CALL, dest, nbytes)?, rank, src_addr)?;
        out(CALL, handle_out, h)
    })
}

/// `RGASNET_OK` (and the handle is gone) when complete, `RGASNET_ERR_NOT_READY` if not yet.
#[no_mangle]
pub extern "C" fn rgasnet_test(handle: rgasnet_handle) -> i32 {
    const CALL: &str = "rgasnet_test";
    let mut ready = false;
    let rc = guard(CALL, || {
        ready = state::job(CALL)?.complete(CALL, handle, false)?;
        Ok(())
    });
    if rc == RGASNET_OK && !ready {
        return RGASNET_ERR_NOT_READY;
    }
    rc
}

/// Waits (polling) until the operation completes; the handle is gone afterwards.
#[no_mangle]
pub extern "C" fn rgasnet_wait(handle: rgasnet_handle) -> i32 {
    const CALL: &str = "rgasnet_wait";
    guard(CALL, || {
        state::job(CALL)?.complete(CALL, handle, true).map(|_| ())
    })
}

/// Implicit-handle put of this thread (`src` may be reused on return).
#[no_mangle]
pub extern "C" fn rgasnet_put_nbi(
    rank: u32,
    dest_addr: u64,
    src: *const c_void,
    nbytes: usize,
) -> i32 {
    const CALL: &str = "rgasnet_put_nbi";
    guard(CALL, || {
        state::job(CALL)?.put_nbi(rank, dest_addr, bytes(CALL, src, nbytes)?)
    })
}

/// Implicit-handle get of this thread (`dest` untouched by the caller until the sync).
#[no_mangle]
pub extern "C" fn rgasnet_get_nbi(
    dest: *mut c_void,
    rank: u32,
    src_addr: u64,
    nbytes: usize,
) -> i32 {
    const CALL: &str = "rgasnet_get_nbi";
    guard(CALL, || {
        state::job(CALL)?.get_nbi(bytes_mut(CALL, dest, nbytes)?, rank, src_addr)
    })
}

/// Waits until this thread's implicit operations of kind `which` (`RGASNET_SYNC_*`) completed.
#[no_mangle]
pub extern "C" fn rgasnet_sync_nbi(which: i32) -> i32 {
    const CALL: &str = "rgasnet_sync_nbi";
    guard(CALL, || state::job(CALL)?.sync_nbi(which, true).map(|_| ()))
}

/// `RGASNET_OK` when this thread's implicit operations of kind `which` completed,
/// `RGASNET_ERR_NOT_READY` if not yet.
#[no_mangle]
pub extern "C" fn rgasnet_try_sync_nbi(which: i32) -> i32 {
    const CALL: &str = "rgasnet_try_sync_nbi";
    let mut done = false;
    let rc = guard(CALL, || {
        done = state::job(CALL)?.sync_nbi(which, false)?;
        Ok(())
    });
    if rc == RGASNET_OK && !done {
        return RGASNET_ERR_NOT_READY;
    }
    rc
}

/// Ends the whole job with `code`: every rank stops and the launcher exits with `code`.
/// Never returns; safe to call again (from an exit handler, another thread) while ending.
#[no_mangle]
pub extern "C" fn rgasnet_exit(code: i32) -> ! {
    exit_job(code)
}
