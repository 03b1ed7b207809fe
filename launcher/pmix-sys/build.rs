//! Finds libpmix (`PMIX_DIR`, else pkg-config's `pmix`), links it and generates the bindings of
//! `pmix.h`, allowlisted to the PMIx names.

use std::path::{Path, PathBuf};

/// One clear line naming the fix, then a failed build.
fn fail(msg: &str) -> ! {
    eprintln!(
        "error: pmix-sys: {msg}; install libpmix-dev (Debian) or set PMIX_DIR to the PMIx \
         prefix (with include/pmix.h and lib/libpmix.so)"
    );
    std::process::exit(1);
}

fn main() {
    println!("cargo:rerun-if-env-changed=PMIX_DIR");
    println!("cargo:rerun-if-changed=wrapper.h");
    let includes: Vec<PathBuf> = match std::env::var_os("PMIX_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            let include = dir.join("include");
            if !include.join("pmix.h").is_file() {
                fail(&format!("PMIX_DIR={} has no include/pmix.h", dir.display()));
            }
            let lib = ["lib", "lib64"]
                .iter()
                .map(|l| dir.join(l))
                .find(|l| has_lib(l))
                .unwrap_or_else(|| {
                    fail(&format!(
                        "PMIX_DIR={} has no lib/libpmix.so or lib64/libpmix.so",
                        dir.display()
                    ))
                });
            println!("cargo:rustc-link-search=native={}", lib.display());
            println!("cargo:rustc-link-lib=pmix");
            vec![include]
        }
        None => match pkg_config::Config::new().probe("pmix") {
            Ok(lib) => lib.include_paths,
            Err(e) => fail(&format!("libpmix not found through pkg-config ({e})")),
        },
    };
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("PMIx_.*")
        .allowlist_type("pmix_.*")
        .allowlist_var("PMIX_.*")
        .derive_default(true)
        .layout_tests(true)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for inc in &includes {
        builder = builder.clang_arg(format!("-I{}", inc.display()));
    }
    let bindings = builder
        .generate()
        .unwrap_or_else(|e| fail(&format!("bindgen could not read pmix.h ({e})")));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    bindings
        .write_to_file(out.join("bindings.rs"))
        .unwrap_or_else(|e| fail(&format!("cannot write the bindings ({e})")));
}

fn has_lib(dir: &Path) -> bool {
    dir.join("libpmix.so").exists() || dir.join("libpmix.a").exists()
}
