//! The PMI-1 functions, `extern "C"`. Every entry point checks its pointers, catches panics
//! (a panic becomes `PMI_FAIL` with a message on stderr) and reports failures with the
//! standard codes, printing the cause once on stderr: PMI-1 has no error-string call.

use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use crate::kvs::{PmiFailure, Session, KEY_MAX, NAME_MAX, VALUE_MAX};

/// Success.
pub const PMI_SUCCESS: c_int = 0;
/// A failure with no more specific code.
pub const PMI_FAIL: c_int = -1;
/// PMI is not initialized.
pub const PMI_ERR_INIT: c_int = 1;
/// Out of memory.
pub const PMI_ERR_NOMEM: c_int = 2;
/// An invalid argument (a null pointer, a bad string).
pub const PMI_ERR_INVALID_ARG: c_int = 3;
/// A key nobody put.
pub const PMI_ERR_INVALID_KEY: c_int = 4;
/// A key longer than `PMI_KVS_Get_key_length_max`.
pub const PMI_ERR_INVALID_KEY_LENGTH: c_int = 5;
/// An invalid value.
pub const PMI_ERR_INVALID_VAL: c_int = 6;
/// A value longer than `PMI_KVS_Get_value_length_max`, or than the caller's buffer.
pub const PMI_ERR_INVALID_VAL_LENGTH: c_int = 7;
/// A length argument out of range.
pub const PMI_ERR_INVALID_LENGTH: c_int = 8;
/// `PMI_Initialized`: true.
pub const PMI_TRUE: c_int = 1;
/// `PMI_Initialized`: false.
pub const PMI_FALSE: c_int = 0;

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// Runs `f` on the session, with panics caught and failures printed.
fn with_session(call: &str, f: impl FnOnce(&mut Session) -> Result<(), c_int>) -> c_int {
    guard(call, || {
        let mut s = SESSION.lock().unwrap_or_else(|p| p.into_inner());
        match s.as_mut() {
            Some(session) => f(session),
            None => Err(report(call, &PmiFailure::NotInitialized, PMI_ERR_INIT)),
        }
    })
}

fn guard(call: &str, f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => PMI_SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => {
            eprintln!("{call}: internal error (a panic in rgasnet's libpmi)");
            PMI_FAIL
        }
    }
}

/// Prints why `call` failed; returns `code`.
fn report(call: &str, why: &PmiFailure, code: c_int) -> c_int {
    eprintln!("{call}: {why}");
    code
}

fn failure_code(call: &str, why: PmiFailure) -> c_int {
    let code = match &why {
        PmiFailure::NotInitialized => PMI_ERR_INIT,
        PmiFailure::NoSuchKey(_) => PMI_ERR_INVALID_KEY,
        PmiFailure::TooLong("key") => PMI_ERR_INVALID_KEY_LENGTH,
        PmiFailure::TooLong(_) => PMI_ERR_INVALID_VAL_LENGTH,
        PmiFailure::Bootstrap(_) | PmiFailure::ForeignLauncher(_) => PMI_FAIL,
    };
    // A missing key is an answer, not an incident: callers probe for keys.
    if matches!(why, PmiFailure::NoSuchKey(_)) {
        return code;
    }
    report(call, &why, code)
}

/// Writes `v` through `p`, refusing a null pointer.
fn out(call: &str, p: *mut c_int, v: c_int) -> Result<(), c_int> {
    if p.is_null() {
        eprintln!("{call}: the output pointer is NULL");
        return Err(PMI_ERR_INVALID_ARG);
    }
    // SAFETY: non-null (checked); PMI-1's contract: it points to a writable int.
    unsafe { p.write(v) };
    Ok(())
}

/// Copies `v` to the caller's array at `p` (non-null, with room for `v.len()` ints).
fn write_ints(p: *mut c_int, v: &[c_int]) {
    // SAFETY: the callers check that `p` is non-null and, by PMI-1's contract, holds at
    // least `v.len()` ints; the source is a Rust slice that cannot overlap it.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
}

/// Reads a C string argument.
fn string<'a>(call: &str, what: &str, p: *const c_char) -> Result<&'a str, c_int> {
    if p.is_null() {
        eprintln!("{call}: the {what} is NULL");
        return Err(PMI_ERR_INVALID_ARG);
    }
    // SAFETY: non-null (checked); PMI-1's contract: a NUL-terminated string that outlives
    // the call (the borrow does not leave it).
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|_| {
        eprintln!("{call}: the {what} is not valid UTF-8");
        PMI_ERR_INVALID_ARG
    })
}

/// Copies `text` and a NUL into the caller's `buf` of `len` bytes.
fn copy_out(
    call: &str,
    buf: *mut c_char,
    len: c_int,
    text: &[u8],
    short: c_int,
) -> Result<(), c_int> {
    let cap = usize::try_from(len).unwrap_or(0);
    if buf.is_null() {
        eprintln!("{call}: the buffer is NULL");
        return Err(PMI_ERR_INVALID_ARG);
    }
    if text.len() >= cap {
        eprintln!(
            "{call}: {} bytes do not fit a buffer of {len}",
            text.len() + 1
        );
        return Err(short);
    }
    // SAFETY: `buf` is non-null and, by PMI-1's contract, holds `len` > `text.len()` writable
    // bytes; the source is a Rust slice that cannot overlap it.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        buf.add(text.len()).write(0);
    }
    Ok(())
}

/// Joins the job (`rgasnetrun`'s, or a singleton); `*spawned` is `PMI_FALSE`.
#[no_mangle]
pub extern "C" fn PMI_Init(spawned: *mut c_int) -> c_int {
    const CALL: &str = "PMI_Init";
    guard(CALL, || {
        let mut s = SESSION.lock().unwrap_or_else(|p| p.into_inner());
        if s.is_none() {
            *s = Some(Session::start().map_err(|e| failure_code(CALL, e))?);
        }
        if !spawned.is_null() {
            out(CALL, spawned, PMI_FALSE)?;
        }
        Ok(())
    })
}

/// Whether `PMI_Init` succeeded (and `PMI_Finalize` was not called since).
#[no_mangle]
pub extern "C" fn PMI_Initialized(initialized: *mut c_int) -> c_int {
    const CALL: &str = "PMI_Initialized";
    guard(CALL, || {
        let s = SESSION.lock().unwrap_or_else(|p| p.into_inner());
        out(
            CALL,
            initialized,
            if s.is_some() { PMI_TRUE } else { PMI_FALSE },
        )
    })
}

/// Leaves PMI; later calls fail with `PMI_ERR_INIT` until `PMI_Init` again.
#[no_mangle]
pub extern "C" fn PMI_Finalize() -> c_int {
    guard("PMI_Finalize", || {
        let mut s = SESSION.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(session) = s.take() {
            session.finalize();
        }
        Ok(())
    })
}

/// The number of processes in the job.
#[no_mangle]
pub extern "C" fn PMI_Get_size(size: *mut c_int) -> c_int {
    with_session("PMI_Get_size", |s| {
        out(
            "PMI_Get_size",
            size,
            c_int::try_from(s.size()).unwrap_or(c_int::MAX),
        )
    })
}

/// This process's rank.
#[no_mangle]
pub extern "C" fn PMI_Get_rank(rank: *mut c_int) -> c_int {
    with_session("PMI_Get_rank", |s| {
        out(
            "PMI_Get_rank",
            rank,
            c_int::try_from(s.rank()).unwrap_or(c_int::MAX),
        )
    })
}

/// The number of processes the job may grow to: its size (no dynamic processes).
#[no_mangle]
pub extern "C" fn PMI_Get_universe_size(size: *mut c_int) -> c_int {
    PMI_Get_size(size)
}

/// The application number: 0 (one executable per job).
#[no_mangle]
pub extern "C" fn PMI_Get_appnum(appnum: *mut c_int) -> c_int {
    with_session("PMI_Get_appnum", |_| out("PMI_Get_appnum", appnum, 0))
}

/// The number of processes on this host.
#[no_mangle]
pub extern "C" fn PMI_Get_clique_size(size: *mut c_int) -> c_int {
    with_session("PMI_Get_clique_size", |s| {
        let n = c_int::try_from(s.host_ranks().len()).unwrap_or(c_int::MAX);
        out("PMI_Get_clique_size", size, n)
    })
}

/// The ranks on this host, into `ranks` of `length` entries.
#[no_mangle]
pub extern "C" fn PMI_Get_clique_ranks(ranks: *mut c_int, length: c_int) -> c_int {
    const CALL: &str = "PMI_Get_clique_ranks";
    with_session(CALL, |s| {
        let mine = s.host_ranks();
        if ranks.is_null() || usize::try_from(length).map_or(true, |l| l < mine.len()) {
            eprintln!(
                "{CALL}: {} ranks do not fit an array of {length}",
                mine.len()
            );
            return Err(PMI_ERR_INVALID_LENGTH);
        }
        let ints: Vec<c_int> = mine
            .iter()
            .map(|r| c_int::try_from(*r).unwrap_or(c_int::MAX))
            .collect();
        write_ints(ranks, &ints);
        Ok(())
    })
}

/// Collective: every rank's earlier `PMI_KVS_Put`s are visible to every rank afterwards.
#[no_mangle]
pub extern "C" fn PMI_Barrier() -> c_int {
    with_session("PMI_Barrier", |s| {
        s.barrier().map_err(|e| failure_code("PMI_Barrier", e))
    })
}

/// Ends the whole job with `exit_code`, printing `error_msg`.
#[no_mangle]
pub extern "C" fn PMI_Abort(exit_code: c_int, error_msg: *const c_char) -> c_int {
    const CALL: &str = "PMI_Abort";
    let msg = string(CALL, "message", error_msg)
        .unwrap_or("(no message)")
        .to_string();
    let s = SESSION.lock().unwrap_or_else(|p| p.into_inner());
    match s.as_ref() {
        Some(session) => session.abort(exit_code, &msg),
        None => {
            eprintln!("{CALL}({exit_code}) before PMI_Init: {msg}");
            std::process::exit(exit_code)
        }
    }
}

/// The name of the job's key-value space, into `kvsname` of `length` bytes.
#[no_mangle]
pub extern "C" fn PMI_KVS_Get_my_name(kvsname: *mut c_char, length: c_int) -> c_int {
    const CALL: &str = "PMI_KVS_Get_my_name";
    with_session(CALL, |s| {
        copy_out(
            CALL,
            kvsname,
            length,
            s.kvs_name().as_bytes(),
            PMI_ERR_INVALID_LENGTH,
        )
    })
}

/// Longest KVS name, NUL included.
#[no_mangle]
pub extern "C" fn PMI_KVS_Get_name_length_max(length: *mut c_int) -> c_int {
    guard("PMI_KVS_Get_name_length_max", || {
        out("PMI_KVS_Get_name_length_max", length, NAME_MAX as c_int)
    })
}

/// Longest key, NUL included.
#[no_mangle]
pub extern "C" fn PMI_KVS_Get_key_length_max(length: *mut c_int) -> c_int {
    guard("PMI_KVS_Get_key_length_max", || {
        out("PMI_KVS_Get_key_length_max", length, KEY_MAX as c_int)
    })
}

/// Longest value, NUL included.
#[no_mangle]
pub extern "C" fn PMI_KVS_Get_value_length_max(length: *mut c_int) -> c_int {
    guard("PMI_KVS_Get_value_length_max", || {
        out("PMI_KVS_Get_value_length_max", length, VALUE_MAX as c_int)
    })
}

/// Stores `value` under `key` (visible to all after the next `PMI_Barrier`).
#[no_mangle]
pub extern "C" fn PMI_KVS_Put(
    kvsname: *const c_char,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    const CALL: &str = "PMI_KVS_Put";
    with_session(CALL, |s| {
        string(CALL, "KVS name", kvsname)?;
        let key = string(CALL, "key", key)?;
        let value = string(CALL, "value", value)?;
        s.put(key, value.as_bytes())
            .map_err(|e| failure_code(CALL, e))
    })
}

/// Nothing to do: puts are sent at once and published by `PMI_Barrier`.
#[no_mangle]
pub extern "C" fn PMI_KVS_Commit(kvsname: *const c_char) -> c_int {
    const CALL: &str = "PMI_KVS_Commit";
    with_session(CALL, |_| string(CALL, "KVS name", kvsname).map(|_| ()))
}

/// Reads `key` into `value` of `length` bytes; `PMI_ERR_INVALID_KEY` if nobody put it.
#[no_mangle]
pub extern "C" fn PMI_KVS_Get(
    kvsname: *const c_char,
    key: *const c_char,
    value: *mut c_char,
    length: c_int,
) -> c_int {
    const CALL: &str = "PMI_KVS_Get";
    with_session(CALL, |s| {
        string(CALL, "KVS name", kvsname)?;
        let key = string(CALL, "key", key)?;
        let v = s.get(key).map_err(|e| failure_code(CALL, e))?;
        copy_out(CALL, value, length, &v, PMI_ERR_INVALID_VAL_LENGTH)
    })
}
