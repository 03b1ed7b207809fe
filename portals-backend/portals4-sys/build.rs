//! Finds libportals (`PORTALS4_DIR`, else pkg-config's `portals4`), links it and generates the
//! bindings of `portals4.h`, allowlisted to the Portals names.
//!
//! With the feature `header-only` it reads the header alone (`PORTALS4_INCLUDE`, the directory
//! holding `portals4.h`, else `PORTALS4_DIR/include`) and links nothing: the types of a crate
//! that *implements* the API (rgasnet's own `libportals`), which must never link another one.

use std::path::{Path, PathBuf};

/// One clear line naming the fix, then a failed build.
fn fail(msg: &str) -> ! {
    eprintln!(
        "error: portals4-sys: {msg}; set PORTALS4_DIR to a Portals 4 installation (with \
         include/portals4.h and lib/libportals.so), e.g. the reference implementation built by \
         scripts/portals4-ref.sh"
    );
    std::process::exit(1);
}

fn main() {
    println!("cargo:rerun-if-env-changed=PORTALS4_DIR");
    println!("cargo:rerun-if-env-changed=PORTALS4_INCLUDE");
    let include = if std::env::var_os("CARGO_FEATURE_HEADER_ONLY").is_some() {
        header_only()
    } else {
        find_library()
    };
    generate(&include);
}

/// The header's directory for a build that links nothing.
fn header_only() -> PathBuf {
    let include = match (
        std::env::var_os("PORTALS4_INCLUDE"),
        std::env::var_os("PORTALS4_DIR"),
    ) {
        (Some(inc), _) => PathBuf::from(inc),
        (None, Some(dir)) => PathBuf::from(dir).join("include"),
        (None, None) => fail_header(
            "PORTALS4_INCLUDE is not set (the directory holding the standard portals4.h, e.g. \
             the include/ of the Portals 4 release tarball; scripts/libportals.sh sets it)",
        ),
    };
    if !include.join("portals4.h").is_file() {
        fail_header(&format!(
            "{} has no portals4.h; set PORTALS4_INCLUDE to the directory that holds it",
            include.display()
        ));
    }
    include
}

/// One clear line naming the fix for a header-only build, then a failed build.
fn fail_header(msg: &str) -> ! {
    eprintln!("error: portals4-sys (header-only): {msg}");
    std::process::exit(1);
}

/// Finds and links libportals; returns its include directory.
fn find_library() -> PathBuf {
    match std::env::var_os("PORTALS4_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            let include = dir.join("include");
            if !include.join("portals4.h").is_file() {
                fail(&format!(
                    "PORTALS4_DIR={} has no include/portals4.h",
                    dir.display()
                ));
            }
            let lib = ["lib", "lib64"]
                .iter()
                .map(|l| dir.join(l))
                .find(|l| has_lib(l))
                .unwrap_or_else(|| {
                    fail(&format!(
                        "PORTALS4_DIR={} has no lib/libportals.so or lib64/libportals.so",
                        dir.display()
                    ))
                });
            // `cargo test` and `cargo run` put this on the loader's path when it lies inside
            // the target directory (scripts/portals4-ref.sh builds there); elsewhere set
            // LD_LIBRARY_PATH.
            println!("cargo:rustc-link-search=native={}", lib.display());
            println!("cargo:rustc-link-lib=portals");
            println!("cargo:root={}", dir.display());
            include
        }
        None => match pkg_config::Config::new().probe("portals4") {
            Ok(lib) => lib
                .include_paths
                .into_iter()
                .find(|p| p.join("portals4.h").is_file())
                .unwrap_or_else(|| fail("pkg-config's portals4 has no portals4.h")),
            Err(_) => {
                fail("libportals not found (PORTALS4_DIR is not set, no pkg-config portals4)")
            }
        },
    }
}

/// Writes the bindings of `include/portals4.h` to `OUT_DIR/bindings.rs`.
fn generate(include: &Path) {
    let header = include.join("portals4.h");
    println!("cargo:rerun-if-changed={}", header.display());
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_arg(format!("-I{}", include.display()))
        .allowlist_function("Ptl.*")
        .allowlist_type("ptl_.*")
        .allowlist_var("PTL_.*")
        // The option bits of portals4.h are `1 << ENUM_VALUE` macros that bindgen cannot
        // evaluate; their enums give the shifts.
        .allowlist_type("ni_types|ni_features|pt_options|md_options|mele_options|me_options")
        .derive_default(true)
        .layout_tests(true)
        .generate_comments(false)
        .generate()
        .unwrap_or_else(|e| {
            fail(&format!(
                "bindgen could not read {} ({e})",
                header.display()
            ))
        });
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    bindings
        .write_to_file(out.join("bindings.rs"))
        .unwrap_or_else(|e| fail(&format!("cannot write the bindings ({e})")));
}

fn has_lib(dir: &Path) -> bool {
    dir.join("libportals.so").exists() || dir.join("libportals.a").exists()
}
