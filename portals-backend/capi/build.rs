//! Gives the shared library the soname of the Portals 4 ABI, `libportals.so.4`, so that a
//! program linked against it looks for that name (as for any libportals).

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libportals.so.4");
}
