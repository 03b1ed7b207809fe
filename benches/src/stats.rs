//! Medians, spreads and the size sweep shared by every benchmark.

use std::time::Duration;

/// Median of `v` (the upper one for an even count, so that it is always a measured value);
/// `None` when empty. NaNs sort last and never become the median of a set of real numbers
/// with more than half real values.
pub fn median_f64(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s.get(s.len() / 2).copied()
}

/// Median of durations (upper median, as [`median_f64`]).
pub fn median_duration(v: &[Duration]) -> Option<Duration> {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len() / 2).copied()
}

/// The `q`-quantiles (each in `0.0..=1.0`, nearest rank) of `v`; empty for an empty `v`.
pub fn quantiles(v: &[Duration], qs: &[f64]) -> Vec<Duration> {
    let mut s = v.to_vec();
    s.sort_unstable();
    let Some(last) = s.len().checked_sub(1) else {
        return Vec::new();
    };
    qs.iter()
        .map(|q| s[((last as f64 * q.clamp(0.0, 1.0)).round() as usize).min(last)])
        .collect()
}

/// Median with the range it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Number of samples.
    pub n: usize,
}

impl Spread {
    /// `median,min,max,n`: the four CSV columns of a spread (`compare`'s CSV files).
    pub fn csv_fields(&self) -> String {
        format!("{},{},{},{}", self.median, self.min, self.max, self.n)
    }

    /// The spread of `v`; `None` when empty.
    pub fn of(v: &[f64]) -> Option<Spread> {
        let median = median_f64(v)?;
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Spread {
            median,
            min,
            max,
            n: v.len(),
        })
    }
}

/// GASNet's size sweep: 0 (when `min` is 0), 1, 2, 4, ... doubling; when the next doubling
/// would pass `max`, `max` itself comes last (GASNet prints ` max:` before it).
pub fn size_sweep(min: usize, max: usize) -> Vec<SweepSize> {
    let mut out = Vec::new();
    let mut sz = min;
    while sz <= max {
        out.push(SweepSize {
            size: sz,
            is_max_marker: false,
        });
        if sz == max {
            break;
        }
        sz = if sz == 0 {
            1
        } else if sz * 2 > max {
            out.push(SweepSize {
                size: max,
                is_max_marker: true,
            });
            break;
        } else {
            sz * 2
        };
    }
    out
}

/// One size of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepSize {
    /// Bytes.
    pub size: usize,
    /// This is the final, non-power-of-two maximum (print ` max:` before it).
    pub is_max_marker: bool,
}

/// Iterations for one size: `iters`, but no more than what moves `byte_budget` bytes (and
/// at least `min_iters`), so that sweeps up to many MiB finish in seconds.
pub fn iters_for(size: usize, iters: u64, byte_budget: u64, min_iters: u64) -> u64 {
    if size == 0 {
        return iters;
    }
    let by_budget = byte_budget / size as u64;
    iters.min(by_budget).max(min_iters.min(iters)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_pick_nearest_ranks() {
        let v: Vec<Duration> = (1..=100).rev().map(Duration::from_micros).collect();
        let q = quantiles(&v, &[0.0, 0.5, 0.99, 1.0]);
        assert_eq!(
            q,
            [1, 51, 99, 100].map(Duration::from_micros).to_vec(),
            "sorted first, ranks rounded"
        );
        assert!(quantiles(&[], &[0.5]).is_empty());
    }

    #[test]
    fn medians_and_spread() {
        assert_eq!(median_f64(&[]), None);
        assert_eq!(median_f64(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_f64(&[4.0, 1.0, 3.0, 2.0]), Some(3.0));
        let s = Spread::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (3.0, 1.0, 5.0, 3));
        let d = Duration::from_micros;
        assert_eq!(median_duration(&[d(9), d(1), d(5)]), Some(d(5)));
        assert_eq!(median_duration(&[]), None);
    }

    #[test]
    fn sweep_matches_gasnet() {
        let sizes: Vec<(usize, bool)> = size_sweep(0, 65_000)
            .iter()
            .map(|s| (s.size, s.is_max_marker))
            .collect();
        assert_eq!(sizes.first(), Some(&(0, false)));
        assert_eq!(sizes[1], (1, false));
        assert_eq!(sizes[sizes.len() - 2], (32_768, false));
        assert_eq!(sizes.last(), Some(&(65_000, true)));
        assert_eq!(sizes.len(), 18);
        // A power-of-two maximum needs no marker.
        let s = size_sweep(1, 8);
        assert_eq!(
            s.iter()
                .map(|x| (x.size, x.is_max_marker))
                .collect::<Vec<_>>(),
            vec![(1, false), (2, false), (4, false), (8, false)]
        );
        assert_eq!(size_sweep(0, 0).len(), 1);
        assert!(size_sweep(9, 8).is_empty());
    }

    #[test]
    fn iteration_budget() {
        assert_eq!(iters_for(0, 1000, 1 << 20, 10), 1000);
        assert_eq!(iters_for(8, 1000, 1 << 20, 10), 1000);
        assert_eq!(iters_for(1 << 20, 1000, 64 << 20, 10), 64);
        assert_eq!(iters_for(16 << 20, 1000, 64 << 20, 10), 10);
        assert_eq!(iters_for(16 << 20, 5, 64 << 20, 10), 5);
    }
}
