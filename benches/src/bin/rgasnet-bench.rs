//! `rgasnet-bench`: placeholder until the compare command lands.
fn main() {}
