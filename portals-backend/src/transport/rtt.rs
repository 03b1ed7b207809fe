//! Round-trip time estimation and the retransmission timeout (RFC 6298 style).

use std::time::Duration;

/// Smoothed RTT, its variation, and the resulting retransmission timeout.
#[derive(Debug, Clone)]
pub(crate) struct RttEstimator {
    /// Smoothed RTT and its variation, in whole nanoseconds: Duration's checked
    /// seconds-and-nanoseconds arithmetic cost more than the rest of handling an ack.
    srtt_ns: Option<u64>,
    rttvar_ns: u64,
    min_ns: u64,
    max: Duration,
    /// The peer may hold an ack this long before sending it; added to the timeout so that a
    /// delayed ack is not mistaken for a loss.
    max_ack_delay_ns: u64,
    /// The smoothed RTT as a Duration (what `srtt()` hands out).
    srtt: Option<Duration>,
    /// `rto(0)`, recomputed on every sample: every datagram sent asks for it.
    base: Duration,
}

/// Clock granularity term of RFC 6298 (`G`): the timeout is never closer than this to SRTT.
const GRANULARITY: Duration = Duration::from_micros(50);

/// Nanoseconds of `d`, saturating (u64 nanoseconds last 584 years).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl RttEstimator {
    pub(crate) fn new(
        initial: Duration,
        min: Duration,
        max: Duration,
        max_ack_delay: Duration,
    ) -> Self {
        RttEstimator {
            srtt_ns: None,
            rttvar_ns: 0,
            min_ns: nanos(min),
            max,
            max_ack_delay_ns: nanos(max_ack_delay),
            srtt: None,
            base: initial.clamp(min, max.max(min)),
        }
    }

    /// Feeds one sample (already corrected for the peer's ack delay).
    #[inline]
    pub(crate) fn sample(&mut self, rtt: Duration) {
        let r = nanos(rtt);
        let (s, v) = match self.srtt_ns {
            None => (r, r / 2),
            Some(s) => {
                let err = s.abs_diff(r);
                (
                    s.saturating_mul(7).saturating_add(r) / 8,
                    self.rttvar_ns.saturating_mul(3).saturating_add(err) / 4,
                )
            }
        };
        self.srtt_ns = Some(s);
        self.rttvar_ns = v;
        self.srtt = Some(Duration::from_nanos(s));
        let base = s
            .saturating_add(v.saturating_mul(4).max(nanos(GRANULARITY)))
            .saturating_add(self.max_ack_delay_ns);
        self.base = Duration::from_nanos(base.max(self.min_ns)).min(self.max);
    }

    /// The smoothed RTT, once a sample was taken.
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The retransmission timeout after `backoff` consecutive expirations, clamped to
    /// `[min, max]`.
    pub(crate) fn rto(&self, backoff: u32) -> Duration {
        if backoff == 0 {
            return self.base;
        }
        // Doubling saturates well before 2^16; beyond that the clamp to `max` decides anyway.
        let factor = 1u32 << backoff.min(16);
        self.base.saturating_mul(factor).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est() -> RttEstimator {
        RttEstimator::new(
            Duration::from_millis(20),
            Duration::from_millis(1),
            Duration::from_secs(1),
            Duration::from_micros(200),
        )
    }

    #[test]
    fn initial_rto_before_samples() {
        let e = est();
        assert_eq!(e.srtt(), None);
        assert_eq!(e.rto(0), Duration::from_millis(20));
        assert_eq!(e.rto(1), Duration::from_millis(40));
        assert_eq!(e.rto(30), Duration::from_secs(1));
    }

    #[test]
    fn samples_follow_rfc6298() {
        let mut e = est();
        e.sample(Duration::from_millis(8));
        assert_eq!(e.srtt(), Some(Duration::from_millis(8)));
        // srtt 8 ms + 4 * rttvar (4 ms) + ack delay 0.2 ms
        assert_eq!(e.rto(0), Duration::from_micros(24_200));
        e.sample(Duration::from_millis(16));
        // rttvar = (3*4 + 8)/4 = 5 ms, srtt = (7*8 + 16)/8 = 9 ms
        assert_eq!(e.srtt(), Some(Duration::from_millis(9)));
        assert_eq!(e.rto(0), Duration::from_micros(29_200));
    }

    #[test]
    fn rto_is_clamped() {
        let mut e = est();
        e.sample(Duration::from_micros(10));
        assert_eq!(e.rto(0), Duration::from_millis(1));
        e.sample(Duration::from_secs(100));
        assert_eq!(e.rto(0), Duration::from_secs(1));
    }
}
