//! `rgasnetrun`: starts an rgasnet job.
fn main() {
    eprintln!("rgasnetrun: not built yet");
    std::process::exit(2);
}
