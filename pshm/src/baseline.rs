//! Raw baselines of this machine, printed by the benchmarks next to their own figures: a flag
//! ping-pong through shared memory between two processes (the floor for any shared-memory AM
//! round trip), the same ping-pong with the request and the answer on two cache lines (the
//! floor for any design that carries a message each way in its own line, as queues do), the
//! same again with every message in the next cell of a ring (the floor for a queue that moves
//! through a ring of cells, as `rgasnet-pshm`'s do), a counter barrier among forked processes
//! (the floor for the node barrier) and `memcpy` bandwidth (the ceiling for a put).
//!
//! Run them while the job's other processes are idle: the ping-pong needs two cores.
#![deny(unsafe_code)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::barrier::{BarrierName, BarrierWords};
use crate::error::{BaselineError, SetupError};
use crate::segment::{as_u32, fork_child, Mapping};
use crate::wait::{spin_until, WaitPolicy};

/// How long a baseline waits for its partner (the ping-pongs) or for the other members (the
/// barrier floor) before it gives up with [`BaselineError::PartnerTimeout`].
pub const PARTNER_TIMEOUT: Duration = Duration::from_secs(10);
/// Word of the flag (the request), and of the parent's pid (on another line).
const FLAG: usize = 0;
const PARENT: usize = 16;
/// Word holding the ring ping-pong's cells per ring, written by the parent before the fork.
const RING_LEN: usize = 32;
/// Word the partner answers in, chosen by the parent before the fork: [`FLAG`] itself, or
/// [`OTHER_LINE`].
const ANSWER_AT: usize = 24;
/// The answer's word on a cache line of its own (64-byte lines: eight words further on).
const OTHER_LINE: usize = 8;
const STOP: u64 = u64::MAX;
/// Round trips before timing starts, whatever the run length: the partner is scheduled and
/// the line is hot.
const WARM_UP: u32 = 1000;

/// The median of `v` (sorted in place); `None` if empty.
pub fn median<T: PartialOrd + Copy>(v: &mut [T]) -> Option<T> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get(v.len() / 2).copied()
}

/// Median round-trip time of a flag ping-pong between this process and a forked child over
/// one shared cache line: `runs` runs of `iterations` round trips each.
pub fn shm_flag_pingpong(iterations: u32, runs: u32) -> Result<Duration, BaselineError> {
    pingpong(iterations, runs, FLAG)
}

/// [`shm_flag_pingpong`] with the answer written on another cache line than the request: each
/// line then moves twice per round trip (written by one side, read by the other) instead of
/// the flag's single line going back and forth, which is what a round trip through two
/// message queues costs before any software runs.
pub fn shm_two_line_pingpong(iterations: u32, runs: u32) -> Result<Duration, BaselineError> {
    pingpong(iterations, runs, OTHER_LINE)
}

/// [`shm_two_line_pingpong`] with every message in a new cache line: the request and the
/// answer each go to the next 64-byte cell of a ring of `cells` cells (one ring per
/// direction), committed by storing the cell's position + 1 in its first word, as
/// `rgasnet-pshm`'s queues do. Nothing else of a queue: no reservation, no record header, no
/// release of consumed cells. So this is the floor for any queue that moves through a ring of
/// cells, and its distance from the two-line figure is what moving to a new line per message
/// costs on the machine at hand. [`RING_CELLS`], as many cells as a queue has, is the floor
/// for `rgasnet-pshm`; one cell is the two-line ping-pong with a position for a flag. `cells`
/// lies in `1..=`[`MAX_RING_CELLS`].
pub fn shm_ring_pingpong(
    cells: usize,
    iterations: u32,
    runs: u32,
) -> Result<Duration, BaselineError> {
    if iterations == 0 || runs == 0 {
        return Err(BaselineError::Empty);
    }
    if !(1..=MAX_RING_CELLS).contains(&cells) {
        return Err(BaselineError::RingCells {
            cells,
            max: MAX_RING_CELLS,
        });
    }
    let map = Mapping::anonymous((RING_FIRST + 2 * cells * CELL_WORDS) * 8)?;
    let words = map.words();
    let (Some(requests), Some(answers)) =
        (ring_cells(words, 0, cells), ring_cells(words, 1, cells))
    else {
        return Err(BaselineError::Setup(SetupError::Config(format!(
            "the ring ping-pong's cells lie beyond its mapping of {} words",
            words.len()
        ))));
    };
    words[PARENT].store(u64::from(std::process::id()), Ordering::Relaxed);
    words[RING_LEN].store(cells as u64, Ordering::Relaxed);
    let child = Child(fork_child(&map, ring_partner)?);
    let mut position = 0u64;
    let round_trip = || -> Result<(), BaselineError> {
        let cell = ring_cell(requests, position);
        cell[1].store(position, Ordering::Relaxed);
        cell[0].store(position + 1, Ordering::Release);
        let answer = ring_cell(answers, position);
        wait_for(&answer[0], position + 1)?;
        // The partner copies the request's payload word: a check that it read this request.
        let payload = answer[1].load(Ordering::Relaxed);
        if payload != position {
            return Err(BaselineError::WrongAnswer { position, payload });
        }
        position += 1;
        Ok(())
    };
    let per_trip = timed_runs(u64::from(WARM_UP), iterations, runs, round_trip);
    // The partner's next look is at the request cell of `position`.
    ring_cell(requests, position)[0].store(STOP, Ordering::Release);
    child.reap();
    per_trip
}

/// Cells per ring of [`shm_ring_pingpong`]: as many as a queue of `rgasnet-pshm` has by
/// default ([`MIN_QUEUE_CELLS`](crate::MIN_QUEUE_CELLS), the smallest ring that holds the
/// largest record), so that the floor walks through as much memory per lap as the queues do.
pub const RING_CELLS: usize = crate::layout::MIN_QUEUE_CELLS;
/// Most cells per ring [`shm_ring_pingpong`] takes: 64 Ki cells, 4 MiB per ring.
pub const MAX_RING_CELLS: usize = 65_536;
/// Words of a 64-byte cell.
const CELL_WORDS: usize = 8;
/// First word of the ring ping-pong's request ring (its answer ring follows): a page past
/// the control words.
const RING_FIRST: usize = 512;

/// The cells of ring `which` (0: requests, 1: answers) of a ring ping-pong with `cells` cells
/// per ring; `None` if the mapping is too short.
fn ring_cells(words: &[AtomicU64], which: usize, cells: usize) -> Option<&[AtomicU64]> {
    let first = RING_FIRST + which * cells * CELL_WORDS;
    words.get(first..first + cells * CELL_WORDS)
}

/// The cell of `position` in `ring` (a whole number of cells, at least one: `ring_cells`).
fn ring_cell(ring: &[AtomicU64], position: u64) -> &[AtomicU64] {
    let first = (position as usize % (ring.len() / CELL_WORDS)) * CELL_WORDS;
    &ring[first..first + CELL_WORDS]
}

/// The forked partner of the ring ping-pong: answers the request at each position in the
/// answer cell of the same position, copying its payload word, until a request cell holds
/// [`STOP`] or the parent is gone. Only atomics and `getppid`, as `fork_child` requires.
fn ring_partner(words: &[AtomicU64]) -> i32 {
    let cells = words
        .get(RING_LEN)
        .map_or(0, |w| w.load(Ordering::Relaxed) as usize);
    if !(1..=MAX_RING_CELLS).contains(&cells) {
        return 2;
    }
    let (Some(requests), Some(answers), Some(parent)) = (
        ring_cells(words, 0, cells),
        ring_cells(words, 1, cells),
        words.get(PARENT),
    ) else {
        return 2;
    };
    let parent = parent.load(Ordering::Relaxed);
    let mut position = 0u64;
    let mut spins = 0u32;
    loop {
        let request = ring_cell(requests, position);
        let marker = request[0].load(Ordering::Acquire);
        if marker == STOP {
            return 0;
        }
        if marker == position + 1 {
            let answer = ring_cell(answers, position);
            answer[1].store(request[1].load(Ordering::Relaxed), Ordering::Relaxed);
            answer[0].store(position + 1, Ordering::Release);
            position += 1;
            continue;
        }
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins % 65_536 == 0 && i64::from(nix::unistd::getppid().as_raw()) != parent as i64 {
            return 1;
        }
    }
}

fn pingpong(iterations: u32, runs: u32, answer_at: usize) -> Result<Duration, BaselineError> {
    if iterations == 0 || runs == 0 {
        return Err(BaselineError::Empty);
    }
    let map = Mapping::anonymous(4096)?;
    let words = map.words();
    words[PARENT].store(u64::from(std::process::id()), Ordering::Relaxed);
    words[ANSWER_AT].store(answer_at as u64, Ordering::Relaxed);
    let child = Child(fork_child(&map, partner)?);
    let flag = &words[FLAG];
    let answer = &words[answer_at];
    let mut next = 1u64;
    let round_trip = || -> Result<(), BaselineError> {
        flag.store(next, Ordering::Release);
        wait_for(answer, next + 1)?;
        next += 2;
        Ok(())
    };
    // Warm-up: the partner is scheduled and the line is hot.
    let per_trip = timed_runs(u64::from(WARM_UP), iterations, runs, round_trip);
    flag.store(STOP, Ordering::Release);
    child.reap();
    per_trip
}

/// Runs `step` `warm_up` times, then `runs` timed runs of `iterations` steps; the median time
/// per step over the runs. Stops at the first error.
fn timed_runs(
    warm_up: u64,
    iterations: u32,
    runs: u32,
    mut step: impl FnMut() -> Result<(), BaselineError>,
) -> Result<Duration, BaselineError> {
    for _ in 0..warm_up {
        step()?;
    }
    let mut samples = Vec::with_capacity(runs as usize);
    for _ in 0..runs {
        let t = Instant::now();
        for _ in 0..iterations {
            step()?;
        }
        samples.push(t.elapsed() / iterations);
    }
    median(&mut samples).ok_or(BaselineError::Empty)
}

/// Spins until `flag == want`; gives up after [`PARTNER_TIMEOUT`] (the clock is read once per
/// 64 Ki spins, so it costs nothing measurable).
fn wait_for(flag: &AtomicU64, want: u64) -> Result<(), BaselineError> {
    let start = Instant::now();
    let mut spins = 0u32;
    while flag.load(Ordering::Acquire) != want {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins % 65_536 == 0 && start.elapsed() > PARTNER_TIMEOUT {
            return Err(BaselineError::PartnerTimeout(PARTNER_TIMEOUT));
        }
    }
    Ok(())
}

/// The forked partner: answers every new odd flag value `v` with `v + 1` in the word the
/// parent chose, until told to stop or orphaned. Only atomics and `getppid`
/// (async-signal-safe), as `fork_child` requires.
fn partner(words: &[AtomicU64]) -> i32 {
    let (Some(flag), Some(parent), Some(at)) =
        (words.get(FLAG), words.get(PARENT), words.get(ANSWER_AT))
    else {
        return 2;
    };
    let Some(answer) = words.get(at.load(Ordering::Relaxed) as usize) else {
        return 2;
    };
    let parent = parent.load(Ordering::Relaxed);
    let mut answered = 0u64;
    let mut spins = 0u32;
    loop {
        let v = flag.load(Ordering::Acquire);
        if v == STOP {
            return 0;
        }
        // With the answer on another line the request stays odd after it was answered.
        if v & 1 == 1 && v != answered {
            answer.store(v + 1, Ordering::Release);
            answered = v;
            continue;
        }
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins % 65_536 == 0 && i64::from(nix::unistd::getppid().as_raw()) != parent as i64 {
            return 1;
        }
    }
}

/// The partner process: killed and reaped on every exit path.
struct Child(nix::unistd::Pid);

impl Child {
    fn reap(self) {
        // Dropping kills (a no-op once it exited) and reaps.
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // It normally exits by itself after STOP; SIGKILL covers error paths. Errors (it has
        // already exited) are expected and harmless.
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(self.0, None);
    }
}

/// Words of the counter-barrier floor ([`shm_counter_barrier`]), apart from the ping-pongs'
/// words and laid out as the node barrier's (`layout`): the arrival counter on a line of its
/// own, the generation with the two name words on the next, the sleeper count on another;
/// then the parameters the members read after the fork.
const FLOOR_COUNT: usize = 32;
const FLOOR_GENERATION: usize = 40;
const FLOOR_NAMES: [usize; 2] = [FLOOR_GENERATION + 1, FLOOR_GENERATION + 2];
const FLOOR_MEMBERS: usize = 48;
const FLOOR_BARRIERS: usize = 49;
const FLOOR_YIELD: usize = 50;
const FLOOR_SLEEPERS: usize = 56;
/// Barriers before timing starts: every member has been scheduled and the lines are hot.
const FLOOR_WARM_UP: u64 = 2000;
/// The most processes the floor forks.
pub const MAX_FLOOR_MEMBERS: u32 = 1024;

/// Median time per barrier of the node barrier's shared counter (`barrier`) among `members`
/// processes with nothing above it: this process and `members - 1` forked children arrive
/// (one atomic increment each; the last resets the counter and bumps the generation) and wait
/// for the generation as the node's waits do (`wait::spin_until`), yielding the CPU between
/// looks when `yield_cpu` (a host with more ranks than CPUs: then this is the scheduler's
/// floor), else spinning. No AM layer, no extended API: what a barrier costs this machine
/// before their code runs. `runs` runs of `iterations` barriers each. A member that waits
/// longer than [`PARTNER_TIMEOUT`] gives up, the parent with [`BaselineError::PartnerTimeout`].
pub fn shm_counter_barrier(
    members: u32,
    yield_cpu: bool,
    iterations: u32,
    runs: u32,
) -> Result<Duration, BaselineError> {
    if iterations == 0 || runs == 0 || members == 0 {
        return Err(BaselineError::Empty);
    }
    if members > MAX_FLOOR_MEMBERS {
        return Err(BaselineError::TooManyMembers {
            members,
            max: MAX_FLOOR_MEMBERS,
        });
    }
    let map = Mapping::anonymous(4096)?;
    let words = map.words();
    // Before any child exists, so that this failure leaves none waiting.
    let floor = floor_words(words).ok_or_else(|| {
        SetupError::Config(format!(
            "the barrier floor's words lie beyond its mapping of {} words",
            words.len()
        ))
    })?;
    let total = FLOOR_WARM_UP + u64::from(iterations) * u64::from(runs);
    // Relaxed: the fork orders these before the children read them.
    words[FLOOR_MEMBERS].store(u64::from(members), Ordering::Relaxed);
    words[FLOOR_BARRIERS].store(total, Ordering::Relaxed);
    words[FLOOR_YIELD].store(u64::from(yield_cpu), Ordering::Relaxed);
    let mut children = Vec::with_capacity(members as usize - 1);
    for _ in 1..members {
        children.push(Child(fork_child(&map, barrier_member)?));
    }
    let barrier = || {
        if floor_barrier(&floor, members, yield_cpu) {
            Ok(())
        } else {
            Err(BaselineError::PartnerTimeout(PARTNER_TIMEOUT))
        }
    };
    let per_barrier = timed_runs(FLOOR_WARM_UP, iterations, runs, barrier);
    for child in children {
        child.reap();
    }
    per_barrier
}

/// The floor's barrier words in `words`; `None` if the mapping is too short.
fn floor_words(words: &[AtomicU64]) -> Option<BarrierWords<'_>> {
    Some(BarrierWords {
        count: as_u32(words.get(FLOOR_COUNT)?),
        generation: as_u32(words.get(FLOOR_GENERATION)?),
        sleepers: as_u32(words.get(FLOOR_SLEEPERS)?),
        names: [words.get(FLOOR_NAMES[0])?, words.get(FLOOR_NAMES[1])?],
    })
}

/// One anonymous barrier of the floor; false if it did not complete within the timeout.
fn floor_barrier(floor: &BarrierWords<'_>, members: u32, yield_cpu: bool) -> bool {
    let ticket = floor.arrive(members, BarrierName::default());
    // Pure spinning (or yielding) for the whole timeout: the floor never sleeps.
    let policy = if yield_cpu {
        WaitPolicy::crowded(PARTNER_TIMEOUT)
    } else {
        WaitPolicy::roomy(PARTNER_TIMEOUT, Duration::ZERO)
    };
    spin_until(policy, || floor.done(ticket))
}

/// A forked member of the counter-barrier floor: runs as many barriers as the parent. Only
/// atomics, the clock and `sched_yield` (see `fork_child`); a parent that died leaves it
/// waiting, and it gives up after [`PARTNER_TIMEOUT`].
fn barrier_member(words: &[AtomicU64]) -> i32 {
    let (Some(floor), Some(members), Some(total), Some(yield_cpu)) = (
        floor_words(words),
        words.get(FLOOR_MEMBERS),
        words.get(FLOOR_BARRIERS),
        words.get(FLOOR_YIELD),
    ) else {
        return 2;
    };
    // Relaxed: written before the fork.
    let members = members.load(Ordering::Relaxed) as u32;
    let yield_cpu = yield_cpu.load(Ordering::Relaxed) != 0;
    for _ in 0..total.load(Ordering::Relaxed) {
        if !floor_barrier(&floor, members, yield_cpu) {
            return 1;
        }
    }
    0
}

/// Median bandwidth in MB/s (10^6 bytes per second) of copying `bytes` bytes between two
/// buffers with `copy_from_slice` (i.e. `memcpy`), `runs` runs.
pub fn memcpy_bandwidth(bytes: usize, runs: u32) -> Result<f64, BaselineError> {
    if bytes == 0 || runs == 0 {
        return Err(BaselineError::Empty);
    }
    let src: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
    let mut dst = vec![0u8; bytes];
    // About 64 MiB per run: long enough to time, short enough for a shared machine.
    let reps = (64 << 20) / bytes + 1;
    dst.copy_from_slice(&src);
    let mut samples = Vec::with_capacity(runs as usize);
    for _ in 0..runs {
        let t = Instant::now();
        for _ in 0..reps {
            black_box(&mut dst).copy_from_slice(black_box(&src));
        }
        samples.push((bytes * reps) as f64 / t.elapsed().as_secs_f64() / 1e6);
    }
    median(&mut samples).ok_or(BaselineError::Empty)
}

/// The benchmark line for a ping-pong result: `raw: shm flag pingpong rtt 0.110 us`.
pub fn pingpong_line(rtt: Duration) -> String {
    format!(
        "raw: shm flag pingpong rtt {:.3} us",
        rtt.as_secs_f64() * 1e6
    )
}

/// The benchmark line for a memcpy result: `raw: memcpy 1048576 byte 42000.0 MB/s`.
pub fn memcpy_line(bytes: usize, mb_per_s: f64) -> String {
    format!("raw: memcpy {bytes} byte {mb_per_s:.1} MB/s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_the_benchmark_format() {
        assert_eq!(
            pingpong_line(Duration::from_nanos(110)),
            "raw: shm flag pingpong rtt 0.110 us"
        );
        assert_eq!(
            memcpy_line(1_048_576, 42_000.0),
            "raw: memcpy 1048576 byte 42000.0 MB/s"
        );
    }

    #[test]
    fn median_picks_the_middle() {
        assert_eq!(median(&mut [3, 1, 2]), Some(2));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(3.0));
        assert_eq!(median::<u32>(&mut []), None);
    }

    #[test]
    fn pingpong_runs_against_a_real_partner_and_finishes() {
        let rtt = shm_flag_pingpong(200, 3).unwrap();
        assert!(rtt > Duration::ZERO);
        assert!(matches!(shm_flag_pingpong(0, 1), Err(BaselineError::Empty)));
    }

    #[test]
    fn two_line_pingpong_is_answered_once_per_request_and_finishes() {
        // A partner that answered in the request's word, or skipped a request, would leave the
        // parent waiting for a value it never sees (a PartnerTimeout error instead of a time).
        let rtt = shm_two_line_pingpong(200, 3).unwrap();
        assert!(rtt > Duration::ZERO);
        assert!(matches!(
            shm_two_line_pingpong(1, 0),
            Err(BaselineError::Empty)
        ));
    }

    #[test]
    fn ring_pingpong_moves_through_every_cell_and_finishes() {
        // More round trips than cells: the ring wraps several times, and a partner that
        // skipped or repeated a position would leave the parent waiting (PartnerTimeout) or
        // reading another request's payload (WrongAnswer) instead of giving a time.
        for cells in [1, 3, RING_CELLS] {
            let rtt = shm_ring_pingpong(cells, cells as u32 * 3 + 7, 2).unwrap();
            assert!(rtt > Duration::ZERO);
        }
        assert!(matches!(
            shm_ring_pingpong(RING_CELLS, 0, 1),
            Err(BaselineError::Empty)
        ));
        assert!(matches!(
            shm_ring_pingpong(RING_CELLS, 1, 0),
            Err(BaselineError::Empty)
        ));
        for cells in [0, MAX_RING_CELLS + 1] {
            let e = shm_ring_pingpong(cells, 1, 1).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("the ring ping-pong takes 1 to 65536 cells per ring, not {cells}")
            );
        }
    }

    #[test]
    fn counter_barrier_floor_runs_among_forked_members_spinning_or_yielding() {
        // Every member must arrive at each barrier, or the parent would wait and fail with
        // PartnerTimeout. Spinning with two processes (one per CPU of a 2-core CI machine),
        // yielding with three.
        for (members, yield_cpu) in [(2, false), (3, true)] {
            let per_barrier = shm_counter_barrier(members, yield_cpu, 200, 2).unwrap();
            assert!(per_barrier > Duration::ZERO);
        }
        // One member (no child) completes every barrier alone.
        assert!(shm_counter_barrier(1, false, 10, 1).unwrap() > Duration::ZERO);
        for (members, iterations, runs) in [(0, 1, 1), (2, 0, 1), (2, 1, 0)] {
            assert!(matches!(
                shm_counter_barrier(members, true, iterations, runs),
                Err(BaselineError::Empty)
            ));
        }
        // A count that would fork thousands of processes is refused before any fork.
        let e = shm_counter_barrier(MAX_FLOOR_MEMBERS + 1, true, 1, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the barrier floor forks at most 1024 processes, not 1025"
        );
    }

    #[test]
    fn memcpy_bandwidth_is_positive() {
        assert!(memcpy_bandwidth(4096, 1).unwrap() > 0.0);
        assert!(matches!(memcpy_bandwidth(0, 1), Err(BaselineError::Empty)));
    }
}
