//! Round-trip time estimation and the retransmission timeout (RFC 6298 style).

use std::time::Duration;

/// Smoothed RTT, its variation, and the resulting retransmission timeout.
#[derive(Debug, Clone)]
pub(crate) struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    initial: Duration,
    min: Duration,
    max: Duration,
    /// The peer may hold an ack this long before sending it; added to the timeout so that a
    /// delayed ack is not mistaken for a loss.
    max_ack_delay: Duration,
    /// `rto(0)`, recomputed on every sample: every datagram sent asks for it.
    base: Duration,
}

/// Clock granularity term of RFC 6298 (`G`): the timeout is never closer than this to SRTT.
const GRANULARITY: Duration = Duration::from_micros(50);

impl RttEstimator {
    pub(crate) fn new(
        initial: Duration,
        min: Duration,
        max: Duration,
        max_ack_delay: Duration,
    ) -> Self {
        let mut e = RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            initial,
            min,
            max,
            max_ack_delay,
            base: initial,
        };
        e.base = e.compute_base();
        e
    }

    fn compute_base(&self) -> Duration {
        let base = match self.srtt {
            None => self.initial,
            Some(srtt) => srtt + (self.rttvar * 4).max(GRANULARITY) + self.max_ack_delay,
        };
        base.clamp(self.min, self.max)
    }

    /// Feeds one sample (already corrected for the peer's ack delay).
    pub(crate) fn sample(&mut self, rtt: Duration) {
        // In whole nanoseconds: Duration's checked seconds-and-nanoseconds arithmetic cost
        // more than the rest of handling an ack. Samples beyond u64 nanoseconds (584 years)
        // saturate.
        let r = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX);
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let (s, v) = (ns(srtt), ns(self.rttvar));
                let err = s.abs_diff(r);
                let var = (v.saturating_mul(3).saturating_add(err)) / 4;
                let smooth = (s.saturating_mul(7).saturating_add(r)) / 8;
                self.rttvar = Duration::from_nanos(var);
                self.srtt = Some(Duration::from_nanos(smooth));
            }
        }
        self.base = self.compute_base();
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
        let base = self.base;
        // Doubling saturates well before 2^16; beyond that the clamp to `max` decides anyway.
        let factor = 1u32 << backoff.min(16);
        base.saturating_mul(factor).min(self.max)
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
