//! `include/rgasnet.h` is what cbindgen generates from the crate today: a stale header (a C
//! caller compiled against other signatures) fails here. `RGASNET_BLESS=1` rewrites it.

use std::path::PathBuf;

#[test]
fn header_is_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let path = dir.join("include/rgasnet.h");
    if std::env::var_os("RGASNET_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/rgasnet.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "capi/include/rgasnet.h is out of date with capi/src; regenerate it with \
         `RGASNET_BLESS=1 cargo test -p rgasnet-capi --test header` and commit it"
    );
}
