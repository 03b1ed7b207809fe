//! Measures Region copy speed against memcpy (a development aid).
use rgasnet_portals::Region;
use std::time::Instant;
fn main() {
    let n = 1 << 20;
    let r = Region::new(n);
    let src = vec![7u8; n];
    let mut dst = vec![0u8; n];
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..200 {
            let _ = r.write(0, &src);
        }
        let w = t.elapsed().as_secs_f64() / 200.0;
        let t = Instant::now();
        for _ in 0..200 {
            let _ = r.read(0, &mut dst);
        }
        let rd = t.elapsed().as_secs_f64() / 200.0;
        let t = Instant::now();
        for _ in 0..200 {
            dst.copy_from_slice(&src);
            std::hint::black_box(&dst);
        }
        let m = t.elapsed().as_secs_f64() / 200.0;
        println!(
            "write {:.0} MB/s read {:.0} MB/s memcpy {:.0} MB/s",
            n as f64 / w / 1e6,
            n as f64 / rd / 1e6,
            n as f64 / m / 1e6
        );
    }
}
