//! The machine's state around each job of a comparison: a short shared-memory flag ping-pong
//! and a short UDP loopback ping-pong, measured by `compare` itself just before and just after
//! every job.
//!
//! Why: this project's VM switches between states that differ by far more than the conduits
//! do. In one `scripts/compare-agreement.sh` run the flag ping-pong took 0.06 µs in some
//! repeats and 0.38-0.41 µs in others (the two vCPUs landing close together or far apart on
//! the host), and rgasnet's shared-memory AM Short measured 0.21 µs in the first state and
//! 0.66 µs in the second. GASNet's programs print no baseline of their own, so a repeat in
//! which rgasnet ran in one state and GASNet in the other gave a ratio of 2.7 instead of 0.8,
//! and three such repeats of five moved the median. A ratio means something only between
//! jobs that ran on the same machine: the probes say which did.

use std::time::Duration;

use rgasnet_portals::baseline;

/// Largest `max / min` of a probe figure over the jobs of one comparison for them to count as
/// run in the same state. The states seen differ by 5-6 × (shared memory); within a state
/// the UDP round trip moves by up to a third between jobs.
pub const STATE_TOLERANCE: f64 = 1.5;

/// Round trips of the probe's flag ping-pong (per run; the median of [`SHM_RUNS`] runs), about
/// 0.1-0.5 ms.
const SHM_ROUND_TRIPS: u32 = 500;
const SHM_RUNS: u32 = 5;
/// Round trips of the probe's UDP ping-pong (the median of them; busy-polled, as the raw
/// baselines of the benchmarks are), a few milliseconds.
const UDP_ROUND_TRIPS: usize = 500;

/// The probe figures at one moment; `None` where that probe could not run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MachineState {
    /// Shared-memory flag ping-pong round trip, µs.
    pub shm_flag_us: Option<f64>,
    /// UDP loopback 8-byte round trip, µs.
    pub udp_rtt_us: Option<f64>,
}

/// The states just before and just after one job.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AroundJob {
    /// Before the job started.
    pub before: MachineState,
    /// After it ended.
    pub after: MachineState,
}

impl MachineState {
    /// Measures both probes now (a probe that fails is left out: the comparison goes on, it
    /// only loses that evidence).
    pub fn measure() -> MachineState {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        MachineState {
            shm_flag_us: rgasnet_pshm::baseline::shm_flag_pingpong(SHM_ROUND_TRIPS, SHM_RUNS)
                .ok()
                .map(us),
            udp_rtt_us: baseline::udp_pingpong_rtt(
                8,
                UDP_ROUND_TRIPS,
                baseline::Wait::busy(baseline::DEFAULT_TIMEOUT),
            )
            .ok()
            .map(us),
        }
    }

    /// `shm flag X us, udp Y us` for logs.
    pub fn describe(&self) -> String {
        let f = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{x:.3}"));
        format!(
            "shm flag {} us, udp {} us",
            f(self.shm_flag_us),
            f(self.udp_rtt_us)
        )
    }
}

/// The largest `max / min` of either probe figure over `states` (1.0 when no figure was
/// measured twice): how far apart the machine's states were.
pub fn spread<'a>(states: impl IntoIterator<Item = &'a MachineState>) -> f64 {
    let mut bounds = [(f64::INFINITY, 0.0f64); 2];
    for s in states {
        for (b, v) in bounds.iter_mut().zip([s.shm_flag_us, s.udp_rtt_us]) {
            if let Some(v) = v.filter(|v| *v > 0.0) {
                *b = (b.0.min(v), b.1.max(v));
            }
        }
    }
    bounds
        .iter()
        .filter(|(lo, hi)| lo.is_finite() && *hi > 0.0)
        .map(|(lo, hi)| hi / lo)
        .fold(1.0, f64::max)
}

/// Whether jobs with these surroundings ran in one state (see [`STATE_TOLERANCE`]).
pub fn same_state<'a>(jobs: impl IntoIterator<Item = &'a AroundJob>) -> bool {
    spread(jobs.into_iter().flat_map(|j| [&j.before, &j.after])) <= STATE_TOLERANCE
}

/// Whether a job with these surroundings ran in `state` (see [`STATE_TOLERANCE`]).
pub fn ran_in(job: &AroundJob, state: &MachineState) -> bool {
    spread([&job.before, &job.after, state]) <= STATE_TOLERANCE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(shm: f64, udp: f64) -> MachineState {
        MachineState {
            shm_flag_us: Some(shm),
            udp_rtt_us: Some(udp),
        }
    }

    #[test]
    fn the_spread_is_the_widest_probe() {
        assert_eq!(spread([&st(0.06, 6.0), &st(0.06, 6.0)]), 1.0);
        let s = spread([&st(0.06, 6.0), &st(0.38, 6.0), &st(0.07, 7.5)]);
        assert!((s - 0.38 / 0.06).abs() < 1e-9, "{s}");
        let s = spread([&st(0.06, 5.0), &st(0.066, 7.5)]);
        assert!((s - 1.5).abs() < 1e-9, "{s}");
        // A probe that failed somewhere is judged on the others; none at all is no evidence.
        let partial = MachineState {
            shm_flag_us: None,
            udp_rtt_us: Some(12.0),
        };
        assert!((spread([&st(0.06, 6.0), &partial]) - 2.0).abs() < 1e-9);
        assert_eq!(spread([&MachineState::default()]), 1.0);
        assert_eq!(spread(std::iter::empty()), 1.0);
    }

    #[test]
    fn jobs_share_a_state_when_every_probe_is_within_the_tolerance() {
        let calm = AroundJob {
            before: st(0.06, 6.0),
            after: st(0.065, 7.0),
        };
        let moved = AroundJob {
            before: st(0.06, 6.0),
            after: st(0.40, 6.0),
        };
        assert!(same_state([&calm, &calm]));
        assert!(!same_state([&calm, &moved]));
        assert!(!same_state([&moved]));
        assert!(ran_in(&calm, &st(0.07, 6.5)));
        assert!(!ran_in(&calm, &st(0.40, 6.5)));
        assert!(!ran_in(&moved, &st(0.06, 6.0)));
    }

    #[test]
    fn a_measurement_finds_both_probes_and_describes_them() {
        let s = MachineState::measure();
        let (Some(shm), Some(udp)) = (s.shm_flag_us, s.udp_rtt_us) else {
            panic!("a probe failed: {s:?}");
        };
        assert!(shm > 0.0 && udp > 0.0, "{s:?}");
        assert!(s.describe().starts_with("shm flag "), "{}", s.describe());
        assert_eq!(
            MachineState::default().describe(),
            "shm flag - us, udp - us"
        );
    }
}
