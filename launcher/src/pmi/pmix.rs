//! The PMIx client (libpmix through `pmix-sys`): the FFI module of the PMIx bootstrap, where all
//! of its `unsafe` lives.
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::ptr;

use pmix_sys as ffi;

use super::PmiClient;
use crate::error::BootstrapError;

/// The name in messages.
pub(super) const SERVER: &str = "PMIx";

/// A PMIx client: this process's name (namespace and rank) and the job size.
pub(super) struct Pmix {
    me: ffi::pmix_proc_t,
    size: u32,
    finalized: bool,
}

fn error(call: &'static str, reason: String) -> BootstrapError {
    BootstrapError::Pmi {
        server: SERVER,
        call,
        reason,
    }
}

/// `Ok` for `PMIX_SUCCESS`, else the library's own description of `rc`.
fn check(call: &'static str, rc: ffi::pmix_status_t) -> Result<(), BootstrapError> {
    if rc == ffi::PMIX_SUCCESS as ffi::pmix_status_t {
        return Ok(());
    }
    // SAFETY: PMIx_Error_string takes any status and returns a pointer to a static string
    // (or null), which is only read here.
    let text = unsafe { ffi::PMIx_Error_string(rc) };
    let text = if text.is_null() {
        String::new()
    } else {
        // SAFETY: non-null, and the library's strings are NUL-terminated and static.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    Err(error(call, format!("status {rc} ({text})")))
}

fn c_key(call: &'static str, key: &str) -> Result<CString, BootstrapError> {
    if key.len() > ffi::PMIX_MAX_KEYLEN as usize {
        return Err(error(
            call,
            format!(
                "key {key:?} is longer than PMIx's {} bytes",
                ffi::PMIX_MAX_KEYLEN
            ),
        ));
    }
    CString::new(key).map_err(|_| error(call, format!("key {key:?} contains a NUL byte")))
}

/// A value PMIx returned, copied out.
enum Value {
    U32(u32),
    Bytes(Vec<u8>),
}

impl Pmix {
    /// `PMIx_Init`, then the job size.
    pub(super) fn init() -> Result<Pmix, BootstrapError> {
        let mut me = ffi::pmix_proc_t::default();
        // SAFETY: `me` is a valid out-parameter for the process name; no info array is passed.
        check("PMIx_Init", unsafe {
            ffi::PMIx_Init(&mut me, ptr::null_mut(), 0)
        })?;
        let mut p = Pmix {
            me,
            size: 0,
            finalized: false,
        };
        let job_size = CString::from(c"pmix.job.size");
        p.size = match p.get_value("PMIx_Get(pmix.job.size)", &p.wildcard(), &job_size)? {
            Value::U32(n) if n > 0 => n,
            Value::U32(n) => return Err(error("PMIx_Get(pmix.job.size)", format!("job size {n}"))),
            Value::Bytes(_) => {
                return Err(error(
                    "PMIx_Get(pmix.job.size)",
                    "the server answered with bytes, not a uint32".into(),
                ))
            }
        };
        if p.me.rank >= p.size {
            return Err(error(
                "PMIx_Init",
                format!("rank {} is not below the job size {}", p.me.rank, p.size),
            ));
        }
        Ok(p)
    }

    /// Every process of this job.
    fn wildcard(&self) -> ffi::pmix_proc_t {
        ffi::pmix_proc_t {
            nspace: self.me.nspace,
            rank: ffi::PMIX_RANK_WILDCARD,
        }
    }

    fn get_value(
        &self,
        call: &'static str,
        proc_: &ffi::pmix_proc_t,
        key: &CStr,
    ) -> Result<Value, BootstrapError> {
        let mut val: *mut ffi::pmix_value_t = ptr::null_mut();
        // SAFETY: `proc_` and `key` are valid for the call; `val` is an out-pointer that PMIx
        // sets to a value it allocated.
        check(call, unsafe {
            ffi::PMIx_Get(proc_, key.as_ptr(), ptr::null(), 0, &mut val)
        })?;
        if val.is_null() {
            return Err(error(call, "the server returned no value".into()));
        }
        // SAFETY: PMIx_Get succeeded, so `val` points to an initialized value owned by us.
        let v = unsafe { &*val };
        let out = match u32::from(v.type_) {
            // SAFETY: the type tag says which member of the union is set.
            ffi::PMIX_UINT32 => Ok(Value::U32(unsafe { v.data.uint32 })),
            ffi::PMIX_BYTE_OBJECT => {
                // SAFETY: as above.
                let bo = unsafe { v.data.bo };
                if bo.bytes.is_null() || bo.size == 0 {
                    Ok(Value::Bytes(Vec::new()))
                } else {
                    // SAFETY: a byte object holds `size` bytes at `bytes`, alive until the
                    // value is released below.
                    let s = unsafe { std::slice::from_raw_parts(bo.bytes.cast::<u8>(), bo.size) };
                    Ok(Value::Bytes(s.to_vec()))
                }
            }
            other => Err(error(call, format!("unexpected value type {other}"))),
        };
        // SAFETY: `val` came from PMIx_Get and is released once, the way PMIX_VALUE_RELEASE
        // does: destruct its contents, then free the struct.
        unsafe {
            ffi::PMIx_Value_destruct(val);
            libc::free(val.cast());
        }
        out
    }

    fn fence(&self, call: &'static str, collect: bool) -> Result<(), BootstrapError> {
        let all = self.wildcard();
        let mut info = ffi::pmix_info_t::default();
        let key = b"pmix.collect\0";
        for (dst, src) in info.key.iter_mut().zip(key) {
            *dst = *src as c_char;
        }
        info.value.type_ = ffi::PMIX_BOOL as u16;
        info.value.data.flag = true;
        let (infos, n) = if collect {
            (&info as *const ffi::pmix_info_t, 1)
        } else {
            (ptr::null(), 0)
        };
        // SAFETY: one process name (the wildcard) and zero or one info, all alive for the call.
        check(call, unsafe { ffi::PMIx_Fence(&all, 1, infos, n) })
    }
}

impl PmiClient for Pmix {
    fn server(&self) -> &'static str {
        SERVER
    }

    fn rank(&self) -> u32 {
        self.me.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), BootstrapError> {
        let k = c_key("PMIx_Put", key)?;
        let mut v = ffi::pmix_value_t {
            type_: ffi::PMIX_BYTE_OBJECT as u16,
            ..Default::default()
        };
        v.data.bo = ffi::pmix_byte_object_t {
            bytes: value.as_ptr().cast_mut().cast::<c_char>(),
            size: value.len(),
        };
        // SAFETY: PMIx_Put copies the value into the library's own storage before it returns,
        // and never writes through the byte pointer; `k` and `v` are alive for the call.
        check("PMIx_Put", unsafe {
            ffi::PMIx_Put(ffi::PMIX_GLOBAL as ffi::pmix_scope_t, k.as_ptr(), &mut v)
        })
    }

    fn exchange(&mut self) -> Result<(), BootstrapError> {
        // SAFETY: no arguments; commits this process's puts.
        check("PMIx_Commit", unsafe { ffi::PMIx_Commit() })?;
        self.fence("PMIx_Fence", true)
    }

    fn get(&mut self, rank: u32, key: &str) -> Result<Vec<u8>, BootstrapError> {
        let k = c_key("PMIx_Get", key)?;
        let peer = ffi::pmix_proc_t {
            nspace: self.me.nspace,
            rank,
        };
        match self.get_value("PMIx_Get", &peer, &k)? {
            Value::Bytes(b) => Ok(b),
            Value::U32(_) => Err(error(
                "PMIx_Get",
                format!("rank {rank} published {key:?} as a number, not bytes"),
            )),
        }
    }

    fn barrier(&mut self) -> Result<(), BootstrapError> {
        self.fence("PMIx_Fence", false)
    }

    fn finalize(&mut self) {
        if !self.finalized {
            self.finalized = true;
            // SAFETY: finalizes the client initialized in `init`, once; no info array.
            let _ = unsafe { ffi::PMIx_Finalize(ptr::null(), 0) };
        }
    }

    fn abort(&self, code: i32, msg: &str) {
        abort_job(code, msg);
    }
}

/// `PMIx_Abort` of the whole namespace (thread-safe in PMIx: callable while another thread
/// waits in a fence).
pub(super) fn abort_job(code: i32, msg: &str) {
    let msg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    // SAFETY: a NUL-terminated message alive for the call; no process array means every
    // process of this namespace.
    let _ = unsafe { ffi::PMIx_Abort(code, msg.as_ptr(), ptr::null_mut(), 0) };
}

impl Drop for Pmix {
    fn drop(&mut self) {
        self.finalize();
    }
}
