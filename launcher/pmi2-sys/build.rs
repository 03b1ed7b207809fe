//! Finds Slurm's PMI-2 client library (`PMI2_DIR`, else the system's `slurm/pmi2.h`), links it
//! and generates the bindings of `pmi2.h`, allowlisted to the PMI-2 names.

use std::path::{Path, PathBuf};

/// One clear line naming the fix, then a failed build.
fn fail(msg: &str) -> ! {
    eprintln!(
        "error: pmi2-sys: {msg}; install libpmi2-0-dev (Debian, Slurm's PMI-2) or set PMI2_DIR \
         to the prefix holding include/slurm/pmi2.h (or include/pmi2.h) and lib/libpmi2.so"
    );
    std::process::exit(1);
}

/// `pmi2.h` under `include`, in Slurm's `slurm/` folder or directly.
fn header_in(include: &Path) -> Option<PathBuf> {
    [include.join("slurm/pmi2.h"), include.join("pmi2.h")]
        .into_iter()
        .find(|h| h.is_file())
}

fn main() {
    println!("cargo:rerun-if-env-changed=PMI2_DIR");
    let header = match std::env::var_os("PMI2_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            let header = header_in(&dir.join("include")).unwrap_or_else(|| {
                fail(&format!(
                    "PMI2_DIR={} has no include/slurm/pmi2.h nor include/pmi2.h",
                    dir.display()
                ))
            });
            let lib = ["lib", "lib64"]
                .iter()
                .map(|l| dir.join(l))
                .find(|l| l.join("libpmi2.so").exists() || l.join("libpmi2.a").exists())
                .unwrap_or_else(|| {
                    fail(&format!("PMI2_DIR={} has no lib/libpmi2.so", dir.display()))
                });
            println!("cargo:rustc-link-search=native={}", lib.display());
            header
        }
        None => ["/usr/include", "/usr/local/include"]
            .iter()
            .find_map(|i| header_in(Path::new(i)))
            .unwrap_or_else(|| {
                fail("pmi2.h not found in /usr/include/slurm or /usr/local/include/slurm")
            }),
    };
    println!("cargo:rustc-link-lib=pmi2");
    println!("cargo:rerun-if-changed={}", header.display());
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .allowlist_function("PMI2_.*")
        .allowlist_type("PMI2_.*")
        .allowlist_var("PMI2_.*")
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
