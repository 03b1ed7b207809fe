//! Ratios of rgasnet's paths to GASNet's, taken repeat by repeat. Within a repeat, every path
//! and peer runs each benchmark back to back (see the plan in [`super::run`]), so the figures
//! of one repeat were measured on the same machine, seconds apart; across repeats the VM's
//! speed moves by more than the conduits differ. The median of the per-repeat ratios cancels
//! that drift, where the ratio of two medians (each side's median taken over its own repeats)
//! keeps it: the verdict `compare` and `scripts/compare-agreement.sh` give is this one.
//!
//! Seconds apart is not always the same machine: this VM also jumps between states that
//! differ by more than the conduits (see [`super::probe`]). A repeat whose two jobs the probes
//! place in different states gives no ratio while any repeat gives one from a single state.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::pairs::{self, Roles};
use super::probe::{self, AroundJob};
use super::summary::Sample;
use crate::record::{Kind, Unit};
use crate::stats::Spread;

/// One figure of one of rgasnet's paths against the same figure of one peer.
#[derive(Debug, Clone, PartialEq)]
pub struct PairedRatio {
    /// rgasnet's path (`native`, `pshm`, ...).
    pub ours: String,
    /// The peer (`gasnet-udp`, `gasnet-smp`, ...).
    pub peer: String,
    /// Line shape.
    pub kind: Kind,
    /// What was measured.
    pub figure: String,
    /// Message size.
    pub size: Option<u64>,
    /// Unit of both figures.
    pub unit: Unit,
    /// `ours / peer` over the repeats in which both were measured (in one machine state,
    /// where any were).
    pub ratio: Spread,
    /// Repeats left out because the two jobs ran in different machine states.
    pub state_mismatched: usize,
    /// No repeat ran both jobs in one state: `ratio` is over all of them, and says little.
    pub no_state_match: bool,
}

/// The machine's state around each job, by (path, benchmark, repeat); see [`super::probe`].
pub type JobStates = BTreeMap<(String, String, usize), AroundJob>;

/// For every figure that one of rgasnet's paths and a peer on its medium (by their `roles`,
/// see [`pairs::Role::pairs_with`]) both printed in the same repeats, the spread of `ours / peer` over those repeats. A figure printed twice in one run counts
/// once (its first line); a peer figure of 0 gives no ratio. A repeat in which `states` puts
/// the two jobs in different machine states is left out while another repeat has both in one
/// (a job without a recorded state counts as in any). In the order the figures first appear,
/// rgasnet's path first, then the peer.
pub fn paired_ratios(samples: &[Sample], states: &JobStates, roles: &Roles) -> Vec<PairedRatio> {
    // (path, figure key) -> run -> first sample of that run.
    let mut by: BTreeMap<(&str, String), BTreeMap<usize, &Sample>> = BTreeMap::new();
    let mut order: Vec<(&str, String)> = Vec::new();
    for s in samples {
        let k = (s.path.as_str(), s.record.key());
        let runs = by.entry(k.clone()).or_default();
        if runs.is_empty() {
            order.push(k);
        }
        runs.entry(s.run).or_insert(s);
    }
    let mut peers: Vec<&str> = order
        .iter()
        .map(|(p, _)| *p)
        .filter(|p| roles.get(*p).is_some_and(|r| r.peer))
        .collect();
    peers.sort_unstable();
    peers.dedup();
    let mut out = Vec::new();
    for (ours, key) in order.iter() {
        let Some(our_runs) = by.get(&(*ours, key.clone())) else {
            continue;
        };
        for peer in peers.iter().filter(|p| pairs::paired_paths(roles, ours, p)) {
            let Some(peer_runs) = by.get(&(*peer, key.clone())) else {
                continue;
            };
            // (ratio, whether both jobs ran in one state)
            let pairs: Vec<(f64, bool)> = our_runs
                .iter()
                .filter_map(|(run, a)| {
                    let b = peer_runs.get(run)?;
                    let around = |s: &Sample| states.get(&(s.path.clone(), s.bench.clone(), *run));
                    let matched = probe::same_state(around(a).into_iter().chain(around(b)));
                    (b.record.value > 0.0 && a.record.unit == b.record.unit)
                        .then(|| (a.record.value / b.record.value, matched))
                })
                .collect();
            let matched: Vec<f64> = pairs.iter().filter(|p| p.1).map(|p| p.0).collect();
            let no_state_match = matched.is_empty();
            let ratios: Vec<f64> = if no_state_match {
                pairs.iter().map(|p| p.0).collect()
            } else {
                matched
            };
            let (Some(ratio), Some(first)) = (Spread::of(&ratios), our_runs.values().next()) else {
                continue;
            };
            out.push(PairedRatio {
                ours: (*ours).to_string(),
                peer: (*peer).to_string(),
                kind: first.record.kind,
                figure: first.record.figure.clone(),
                size: first.record.size,
                unit: first.record.unit,
                ratio,
                state_mismatched: if no_state_match {
                    0
                } else {
                    pairs.len() - ratios.len()
                },
                no_state_match,
            });
        }
    }
    out
}

/// Every paired ratio as CSV (`peer_ratios.csv`). `state_mismatched`: the repeats left out
/// (ran in different machine states), or `all` when none ran both jobs in one state and the
/// ratio is over every repeat.
pub fn csv(rows: &[PairedRatio]) -> String {
    let mut s = String::from(
        "ours,peer,kind,figure,size,unit,ratio_median,ratio_min,ratio_max,runs,state_mismatched\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{}",
            r.ours,
            r.peer,
            r.kind.name(),
            r.figure,
            r.size.map(|x| x.to_string()).unwrap_or_default(),
            r.unit.name(),
            r.ratio.csv_fields(),
            if r.no_state_match {
                "all".to_string()
            } else {
                r.state_mismatched.to_string()
            },
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::pairs::test_roles;
    use crate::record::Record;

    fn sample(path: &str, run: usize, figure: &str, value: f64) -> Sample {
        Sample {
            path: path.into(),
            bench: "testam".into(),
            run,
            record: Record {
                kind: Kind::Latency,
                section: Some('A'),
                rank: Some(0),
                figure: figure.into(),
                size: Some(8),
                iters: Some(1000),
                total_us: None,
                value,
                unit: Unit::Us,
                bandwidth_mbs: None,
            },
        }
    }

    #[test]
    fn ratios_are_taken_within_each_repeat_then_their_median() {
        // The machine halves its speed in repeat 1: per repeat, rgasnet is 0.9 of udp each
        // time, while the ratio of the two medians (4.5 / 4.0 = 1.125 on these numbers)
        // would say the opposite.
        let samples = [
            sample("native", 0, "put latency", 4.5),
            sample("gasnet-udp", 0, "put latency", 5.0),
            sample("native", 1, "put latency", 9.0),
            sample("gasnet-udp", 1, "put latency", 10.0),
            sample("native", 2, "put latency", 3.6),
            sample("gasnet-udp", 2, "put latency", 4.0),
            // Only in one repeat on the peer: one ratio.
            sample("native", 0, "get latency", 2.0),
            sample("gasnet-udp", 1, "get latency", 1.0),
            sample("native", 1, "get latency", 3.0),
            // A peer figure of 0 gives none.
            sample("pshm", 0, "AMShort ping-pong", 0.002),
            sample("gasnet-smp", 0, "AMShort ping-pong", 0.0),
        ];
        let rows = paired_ratios(&samples, &JobStates::new(), &test_roles());
        let got: Vec<(&str, &str, &str, f64, usize)> = rows
            .iter()
            .map(|r| {
                (
                    r.ours.as_str(),
                    r.peer.as_str(),
                    r.figure.as_str(),
                    (r.ratio.median * 1000.0).round() / 1000.0,
                    r.ratio.n,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("native", "gasnet-udp", "put latency", 0.9, 3),
                ("native", "gasnet-udp", "get latency", 3.0, 1),
            ]
        );
        let csv = csv(&rows);
        assert_eq!(
            csv.lines().next(),
            Some("ours,peer,kind,figure,size,unit,ratio_median,ratio_min,ratio_max,runs,state_mismatched")
        );
        assert!(csv.contains("\nnative,gasnet-udp,latency,put latency,8,us,0.9,"));
        assert!(csv
            .lines()
            .all(|l| l.ends_with(",0") || l.ends_with("state_mismatched")));
    }

    #[test]
    fn only_a_path_and_a_peer_on_one_medium_are_paired() {
        let samples = [
            sample("native", 0, "put latency", 4.0),
            sample("pshm", 0, "put latency", 0.2),
            sample("loopback", 0, "put latency", 0.1),
            sample("gasnet-udp", 0, "put latency", 5.0),
            sample("gasnet-smp", 0, "put latency", 0.25),
            // A path no role names: paired with nothing.
            sample("mystery", 0, "put latency", 1.0),
        ];
        let rows = paired_ratios(&samples, &JobStates::new(), &test_roles());
        let got: Vec<(&str, &str, f64)> = rows
            .iter()
            .map(|r| (r.ours.as_str(), r.peer.as_str(), r.ratio.median))
            .collect();
        assert_eq!(
            got,
            vec![("native", "gasnet-udp", 0.8), ("pshm", "gasnet-smp", 0.8)]
        );
    }

    #[test]
    fn a_figure_printed_twice_in_a_run_counts_once() {
        let samples = [
            sample("native", 0, "put latency", 2.0),
            sample("native", 0, "put latency", 100.0),
            sample("gasnet-udp", 0, "put latency", 4.0),
        ];
        let rows = paired_ratios(&samples, &JobStates::new(), &test_roles());
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].ratio.median, rows[0].ratio.n), (0.5, 1));
    }

    fn around(shm_before: f64, shm_after: f64) -> AroundJob {
        let st = |shm| probe::MachineState {
            shm_flag_us: Some(shm),
            udp_rtt_us: Some(6.0),
        };
        AroundJob {
            before: st(shm_before),
            after: st(shm_after),
        }
    }

    #[test]
    fn a_repeat_that_ran_the_two_jobs_in_different_states_gives_no_ratio() {
        // The case seen: rgasnet in the slow state (0.66 us) against GASNet in the fast one
        // (0.25) in repeats 1 and 2, both in the fast state in repeat 0 and 3.
        let samples = [
            sample("pshm", 0, "AMShort ping-pong", 0.21),
            sample("gasnet-smp", 0, "AMShort ping-pong", 0.25),
            sample("pshm", 1, "AMShort ping-pong", 0.66),
            sample("gasnet-smp", 1, "AMShort ping-pong", 0.24),
            sample("pshm", 2, "AMShort ping-pong", 0.67),
            sample("gasnet-smp", 2, "AMShort ping-pong", 0.26),
            sample("pshm", 3, "AMShort ping-pong", 0.22),
            sample("gasnet-smp", 3, "AMShort ping-pong", 0.26),
        ];
        let mut states = JobStates::new();
        let key = |p: &str, run| (p.to_string(), "testam".to_string(), run);
        for run in 0..4 {
            states.insert(key("gasnet-smp", run), around(0.06, 0.065));
        }
        states.insert(key("pshm", 0), around(0.06, 0.06));
        states.insert(key("pshm", 1), around(0.38, 0.40));
        // Moved during the job: not the peer's state either.
        states.insert(key("pshm", 2), around(0.06, 0.41));
        // No record (a probe-less job): counts as in any state.
        let rows = paired_ratios(&samples, &states, &test_roles());
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(
            (r.ratio.n, r.state_mismatched, r.no_state_match),
            (2, 2, false)
        );
        assert!((r.ratio.min - 0.21 / 0.25).abs() < 1e-9, "{:?}", r.ratio);
        assert!((r.ratio.max - 0.22 / 0.26).abs() < 1e-9, "{:?}", r.ratio);
        assert!(csv(&rows)
            .lines()
            .nth(1)
            .is_some_and(|l| l.ends_with(",2,2")));

        // No repeat in one state: every repeat counts, and the CSV says so.
        let mut states = JobStates::new();
        for run in 0..4 {
            states.insert(key("gasnet-smp", run), around(0.06, 0.06));
            states.insert(key("pshm", run), around(0.40, 0.40));
        }
        let rows = paired_ratios(&samples, &states, &test_roles());
        assert_eq!((rows[0].ratio.n, rows[0].no_state_match), (4, true));
        assert!(csv(&rows)
            .lines()
            .nth(1)
            .is_some_and(|l| l.ends_with(",4,all")));
    }
}
