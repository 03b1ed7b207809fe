//! `include/pmi.h` is what cbindgen generates from the crate today: a stale header fails here.
//! `RGASNET_BLESS=1` rewrites it.

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
    let path = dir.join("include/pmi.h");
    if std::env::var_os("RGASNET_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/pmi.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "launcher/libpmi/include/pmi.h is out of date with its src; regenerate it with \
         `RGASNET_BLESS=1 cargo test -p rgasnet-libpmi --test header` and commit it"
    );
}
