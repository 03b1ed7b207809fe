//! The PMI-1 calls as a C program makes them, in this test process: a singleton (no
//! launcher variables), its key-value space, and the errors of bad arguments.

use std::ffi::{c_char, c_int, CStr, CString};

use pmi::*;

fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL")
}

#[test]
fn a_singleton_has_rank_0_of_1_and_a_private_key_value_space() {
    // Not started by rgasnetrun or another process manager.
    for v in ["RGASNET_RANK", "PMI_FD", "PMI_PORT", "PMI_RANK"] {
        assert!(
            std::env::var_os(v).is_none(),
            "{v} is set in the test environment"
        );
    }
    let mut initialized: c_int = -1;
    assert_eq!(PMI_Initialized(&mut initialized), PMI_SUCCESS);
    assert_eq!(initialized, PMI_FALSE);
    let mut rank: c_int = -1;
    assert_eq!(PMI_Get_rank(&mut rank), PMI_ERR_INIT, "before PMI_Init");
    let mut spawned: c_int = -1;
    assert_eq!(PMI_Init(&mut spawned), PMI_SUCCESS);
    assert_eq!(spawned, PMI_FALSE);
    let mut size: c_int = -1;
    assert_eq!(PMI_Get_rank(&mut rank), PMI_SUCCESS);
    assert_eq!(PMI_Get_size(&mut size), PMI_SUCCESS);
    assert_eq!((rank, size), (0, 1));

    let mut name = [0 as c_char; 256];
    assert_eq!(PMI_KVS_Get_my_name(name.as_mut_ptr(), 256), PMI_SUCCESS);
    // SAFETY: PMI_KVS_Get_my_name wrote a NUL-terminated string into `name`.
    let kvs = unsafe { CStr::from_ptr(name.as_ptr()) }.to_owned();
    let key = cstr("answer");
    assert_eq!(
        PMI_KVS_Put(kvs.as_ptr(), key.as_ptr(), cstr("42:17").as_ptr()),
        PMI_SUCCESS
    );
    assert_eq!(PMI_KVS_Commit(kvs.as_ptr()), PMI_SUCCESS);
    assert_eq!(PMI_Barrier(), PMI_SUCCESS);
    let mut value = [0 as c_char; 64];
    assert_eq!(
        PMI_KVS_Get(kvs.as_ptr(), key.as_ptr(), value.as_mut_ptr(), 64),
        PMI_SUCCESS
    );
    // SAFETY: PMI_KVS_Get wrote a NUL-terminated string into `value`.
    let got = unsafe { CStr::from_ptr(value.as_ptr()) };
    assert_eq!(got.to_str(), Ok("42:17"));
    // Too small a buffer, a missing key, NULL arguments: codes, no crash.
    assert_eq!(
        PMI_KVS_Get(kvs.as_ptr(), key.as_ptr(), value.as_mut_ptr(), 3),
        PMI_ERR_INVALID_VAL_LENGTH
    );
    assert_eq!(
        PMI_KVS_Get(
            kvs.as_ptr(),
            cstr("nobody").as_ptr(),
            value.as_mut_ptr(),
            64
        ),
        PMI_ERR_INVALID_KEY
    );
    assert_eq!(
        PMI_KVS_Put(kvs.as_ptr(), std::ptr::null(), key.as_ptr()),
        PMI_ERR_INVALID_ARG
    );
    assert_eq!(PMI_Get_rank(std::ptr::null_mut()), PMI_ERR_INVALID_ARG);
    let long_key = cstr(&"k".repeat(300));
    assert_eq!(
        PMI_KVS_Put(kvs.as_ptr(), long_key.as_ptr(), key.as_ptr()),
        PMI_ERR_INVALID_KEY_LENGTH
    );
    let mut clique = [0 as c_int; 4];
    assert_eq!(PMI_Get_clique_ranks(clique.as_mut_ptr(), 4), PMI_SUCCESS);
    assert_eq!(clique[0], 0);
    assert_eq!(PMI_Finalize(), PMI_SUCCESS);
    assert_eq!(PMI_Initialized(&mut initialized), PMI_SUCCESS);
    assert_eq!(initialized, PMI_FALSE);
}
