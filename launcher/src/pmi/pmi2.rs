//! The PMI-2 client (Slurm's libpmi2 through `pmi2-sys`): the FFI module of the PMI-2
//! bootstrap, where all of its `unsafe` lives.
//!
//! PMI-2's key-value space is one namespace per job, of strings: a rank's value goes out in hex,
//! in chunks under keys that carry the rank (`KEY.RANK.CHUNK`), with the chunk count under
//! `KEY.RANK`.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, CStr, CString};

use pmi2_sys as ffi;

use super::PmiClient;
use crate::error::BootstrapError;

/// The name in messages.
const SERVER: &str = "PMI-2";
/// Bytes per value chunk: twice as many hex digits, below PMI2_MAX_VALLEN with its NUL.
const CHUNK: usize = 500;
/// Longest job id read from the server.
const JOBID_LEN: usize = 256;

/// A PMI-2 client.
pub(super) struct Pmi2 {
    rank: u32,
    size: u32,
    jobid: CString,
    finalized: bool,
}

fn error(call: &'static str, reason: String) -> BootstrapError {
    BootstrapError::Pmi {
        server: SERVER,
        call,
        reason,
    }
}

fn check(call: &'static str, rc: c_int) -> Result<(), BootstrapError> {
    if rc == ffi::PMI2_SUCCESS as c_int {
        Ok(())
    } else {
        Err(error(call, format!("error code {rc}")))
    }
}

fn c_key(call: &'static str, key: &str) -> Result<CString, BootstrapError> {
    if key.len() >= ffi::PMI2_MAX_KEYLEN as usize {
        return Err(error(
            call,
            format!(
                "key {key:?} is longer than PMI-2's {} bytes",
                ffi::PMI2_MAX_KEYLEN - 1
            ),
        ));
    }
    CString::new(key).map_err(|_| error(call, format!("key {key:?} contains a NUL byte")))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Pmi2 {
    /// `PMI2_Init`, then the job id.
    pub(super) fn init() -> Result<Pmi2, BootstrapError> {
        let (mut spawned, mut size, mut rank, mut appnum) = (0, 0, 0, 0);
        // SAFETY: four valid out-parameters.
        check("PMI2_Init", unsafe {
            ffi::PMI2_Init(&mut spawned, &mut size, &mut rank, &mut appnum)
        })?;
        let (Ok(rank), Ok(size)) = (u32::try_from(rank), u32::try_from(size)) else {
            return Err(error("PMI2_Init", format!("rank {rank}, size {size}")));
        };
        if rank >= size {
            return Err(error(
                "PMI2_Init",
                format!("rank {rank} is not below the job size {size}"),
            ));
        }
        let mut buf = [0 as c_char; JOBID_LEN];
        // SAFETY: the buffer and its length; the library writes a NUL-terminated id into it.
        check("PMI2_Job_GetId", unsafe {
            ffi::PMI2_Job_GetId(buf.as_mut_ptr(), JOBID_LEN as c_int)
        })?;
        buf[JOBID_LEN - 1] = 0;
        // SAFETY: NUL-terminated (forced above), inside `buf`.
        let jobid = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_owned();
        Ok(Pmi2 {
            rank,
            size,
            jobid,
            finalized: false,
        })
    }

    fn put_str(&self, key: &str, value: &str) -> Result<(), BootstrapError> {
        let k = c_key("PMI2_KVS_Put", key)?;
        let v = CString::new(value).map_err(|_| error("PMI2_KVS_Put", "NUL in value".into()))?;
        // SAFETY: two NUL-terminated strings alive for the call; the library copies them.
        check("PMI2_KVS_Put", unsafe {
            ffi::PMI2_KVS_Put(k.as_ptr(), v.as_ptr())
        })
    }

    fn get_str(&self, rank: u32, key: &str) -> Result<String, BootstrapError> {
        let k = c_key("PMI2_KVS_Get", key)?;
        let mut buf = vec![0 as c_char; ffi::PMI2_MAX_VALLEN as usize + 1];
        let mut len: c_int = 0;
        // SAFETY: job id and key are NUL-terminated; the library writes at most `maxvalue`
        // bytes into `buf`, which is one longer so that it stays NUL-terminated.
        check("PMI2_KVS_Get", unsafe {
            ffi::PMI2_KVS_Get(
                self.jobid.as_ptr(),
                rank as c_int,
                k.as_ptr(),
                buf.as_mut_ptr(),
                ffi::PMI2_MAX_VALLEN as c_int,
                &mut len,
            )
        })
        .map_err(|e| match e {
            BootstrapError::Pmi { reason, .. } => {
                error("PMI2_KVS_Get", format!("{key:?} of rank {rank}: {reason}"))
            }
            other => other,
        })?;
        // SAFETY: NUL-terminated inside `buf` (its last byte is never written).
        let s = unsafe { CStr::from_ptr(buf.as_ptr()) };
        Ok(s.to_string_lossy().into_owned())
    }
}

impl PmiClient for Pmi2 {
    fn server(&self) -> &'static str {
        SERVER
    }

    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), BootstrapError> {
        let chunks: Vec<&[u8]> = value.chunks(CHUNK).collect();
        self.put_str(&format!("{key}.{}", self.rank), &chunks.len().to_string())?;
        for (i, c) in chunks.iter().enumerate() {
            self.put_str(&format!("{key}.{}.{i}", self.rank), &hex(c))?;
        }
        Ok(())
    }

    fn exchange(&mut self) -> Result<(), BootstrapError> {
        // SAFETY: no arguments; commits and waits for every rank's puts.
        check("PMI2_KVS_Fence", unsafe { ffi::PMI2_KVS_Fence() })
    }

    fn get(&mut self, rank: u32, key: &str) -> Result<Vec<u8>, BootstrapError> {
        let count = self.get_str(rank, &format!("{key}.{rank}"))?;
        let count: usize = count.trim().parse().map_err(|_| {
            error(
                "PMI2_KVS_Get",
                format!("rank {rank} published a chunk count {count:?}"),
            )
        })?;
        // The count comes from another process: reserve for what it says only up to a bound.
        let mut out = Vec::with_capacity(count.min(64).saturating_mul(CHUNK));
        for i in 0..count {
            let text = self.get_str(rank, &format!("{key}.{rank}.{i}"))?;
            let bytes = unhex(&text).ok_or_else(|| {
                error(
                    "PMI2_KVS_Get",
                    format!("rank {rank} published chunk {i} of {key:?} that is not hex"),
                )
            })?;
            out.extend_from_slice(&bytes);
        }
        Ok(out)
    }

    fn barrier(&mut self) -> Result<(), BootstrapError> {
        self.exchange()
    }

    fn finalize(&mut self) {
        if !self.finalized {
            self.finalized = true;
            // SAFETY: finalizes the client initialized in `init`, once.
            let _ = unsafe { ffi::PMI2_Finalize() };
        }
    }

    fn abort(&self, _code: i32, msg: &str) {
        let msg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a NUL-terminated message alive for the call; flag 1 aborts the whole job.
        let _ = unsafe { ffi::PMI2_Abort(1, msg.as_ptr()) };
    }
}

impl Drop for Pmi2 {
    fn drop(&mut self) {
        self.finalize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_garbage() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&all)), Some(all));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex(""), Some(Vec::new()));
    }
}
