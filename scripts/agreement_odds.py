"""How likely two `rgasnet-bench compare` runs are to agree within 10 % on every headline,
as a function of the number of repeats, from the jobs that earlier agreement checks kept
(`AGREEMENT_KEEP=DIR scripts/compare-agreement.sh ...`).

usage: agreement_odds.py KEPT_DIR... [--repeats 5,7,9,11,13,15] [--trials 3000] (--help)

Each KEPT_DIR holds `1/` and `2/` (compare's output folders, with `logs/`) and `1.log`,
`2.log` (compare's progress, with the probes after every job). For every headline it takes
the ratio ours / peer of each repeat (the logs of the job's last try), leaving out a repeat
whose two jobs' probes differ by more than compare's STATE_TOLERANCE (1.5) as compare does
(approximately: compare also reads the probe before each job, which the progress log does
not print). It prints the spread of those per-repeat ratios, then draws two compare runs of
n repeats from them (with replacement) and counts how often every headline's two medians
agree within 10 %. Headlines are drawn independently, although put/get 8 B (one testsmall
job) and AM Short/Medium (one testam job) move together; the odds printed are therefore a
little low.
"""
import argparse
import math
import os
import random
import re
import statistics
import sys

STATE_TOLERANCE = 1.5
AGREEMENT = 0.10

SMALL = re.compile(
    r"^A:\s+0 -\s+(\d+) byte :\s+\d+ iters, latency\s+\d+ us total,\s+([\d.]+) us ave\. "
    r"\((\w+) latency\)"
)
AM_SHORT = re.compile(r"^A:\s+AMShort\s+ping-pong roundtrip ReqRep:\s+[\d.]+ sec\s+([\d.]+) us")
AM_MEDIUM = re.compile(
    r"^B:\s+(\d+) AMMedium\s+ping-pong roundtrip ReqRep:\s+[\d.]+ sec\s+([\d.]+) us"
)
BARRIER = re.compile(r"Avg Named Barrier latency:\s+([\d.]+) us")
LARGE = re.compile(
    r"^\w:\s+0 -\s+1048576 byte :\s+\d+ iters, throughput\s+([\d.]+) KB/sec \((\S+) throughput\)"
)
PROGRESS = re.compile(
    r"\[\d+/\d+\] (\w+) on ([\w-]+) \(run (\d+) of \d+.*shm flag ([\d.]+) us, udp ([\d.]+) us"
)


def first(path, match):
    """The first value `match` finds in a log, or None."""
    with open(path) as log:
        for line in log:
            value = match(line)
            if value is not None:
                return value
    return None


def figure(pattern, value, search=False):
    """A line matcher: `value(match)` (None to pass the line by) where `pattern` matches."""

    def match(line):
        m = pattern.search(line) if search else pattern.match(line)
        return value(m) if m else None

    return match


def latency(label, size):
    return figure(
        SMALL,
        lambda m: float(m[2]) if int(m[1]) == size and m[3] == label else None,
    )


def am_medium(size):
    return figure(AM_MEDIUM, lambda m: float(m[2]) if int(m[1]) == size else None)


def seconds_per_mib(label):
    """1 MiB throughput as time per byte, so that every ratio reads ours / peer of a time."""
    return figure(LARGE, lambda m: 1.0 / float(m[1]) if m[2] == label else None)


am_short = figure(AM_SHORT, lambda m: float(m[1]))
barrier = figure(BARRIER, lambda m: float(m[1]), search=True)


# name, benchmark, our path, peer path, our figure, the peer's figure
HEADLINES = [
    ("put 8 B", "testsmall", "native", "gasnet-udp", latency("put", 8), latency("PutBlocking", 8)),
    ("get 8 B", "testsmall", "native", "gasnet-udp", latency("get", 8), latency("GetBlocking", 8)),
    ("AM Short", "testam", "native", "gasnet-udp", am_short, am_short),
    ("AM Medium 8 B", "testam", "native", "gasnet-udp", am_medium(8), am_medium(8)),
    ("barrier", "testbarrier", "native", "gasnet-udp", barrier, barrier),
    ("put 1 MiB", "testlarge", "native", "gasnet-udp", seconds_per_mib("put_bulk"),
     seconds_per_mib("PutBlocking")),
    ("get 1 MiB", "testlarge", "native", "gasnet-udp", seconds_per_mib("get_bulk"),
     seconds_per_mib("GetBlocking")),
    ("shm AM Short", "testam", "pshm", "gasnet-smp", am_short, am_short),
]


def probes(progress):
    """(benchmark, path, repeat) -> (shm flag, udp) after the job's last try."""
    found = {}
    with open(progress) as log:
        for line in log:
            m = PROGRESS.match(line)
            if m:
                found[(m.group(1), m.group(2), int(m.group(3)))] = (
                    float(m.group(4)),
                    float(m.group(5)),
                )
    return found


def same_state(a, b):
    return all(max(x, y) / min(x, y) <= STATE_TOLERANCE for x, y in zip(a, b))


def per_repeat_ratios(kept_dirs):
    ratios = {h[0]: [] for h in HEADLINES}
    for kept in kept_dirs:
        for run in ("1", "2"):
            state = probes(os.path.join(kept, run + ".log"))
            logs = os.path.join(kept, run, "logs")
            for name, bench, ours, peer, our_figure, peer_figure in HEADLINES:
                repeat = 1
                while True:
                    a = os.path.join(logs, f"{ours}-{bench}-{repeat}.txt")
                    b = os.path.join(logs, f"{peer}-{bench}-{repeat}.txt")
                    if not (os.path.exists(a) and os.path.exists(b)):
                        break
                    x, y = first(a, our_figure), first(b, peer_figure)
                    sa, sb = state.get((bench, ours, repeat)), state.get((bench, peer, repeat))
                    if None not in (x, y, sa, sb) and same_state(sa, sb):
                        ratios[name].append(x / y)
                    repeat += 1
    return ratios


def agree(a, b):
    return abs(a / b - 1.0) <= AGREEMENT


def positive(text):
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive count")
    return value


def main(argv):
    parser = argparse.ArgumentParser(
        description="Odds that two compare runs agree on every headline, by repeat count."
    )
    parser.add_argument("kept", nargs="+", metavar="KEPT_DIR", help="AGREEMENT_KEEP folders")
    parser.add_argument(
        "--repeats",
        type=lambda v: [positive(n) for n in v.split(",")],
        default=[5, 7, 9, 11, 13, 15],
        help="repeat counts to draw, comma-separated (default 5,7,9,11,13,15)",
    )
    parser.add_argument("--trials", type=positive, default=3000, help="pairs drawn per count")
    args = parser.parse_args(argv)
    repeats, trials, dirs = args.repeats, args.trials, args.kept
    for kept in dirs:
        for run in ("1", "2"):
            if not os.path.isfile(os.path.join(kept, run + ".log")):
                parser.error(f"{kept}: no {run}.log (not an AGREEMENT_KEEP folder)")
    ratios = per_repeat_ratios(dirs)
    for name, values in ratios.items():
        if len(values) < 2:
            sys.exit(f"{name}: fewer than two repeats found in {' '.join(dirs)}")
        spread = statistics.pstdev([math.log(v) for v in values])
        print(
            f"{name:14s} {len(values):3d} repeats, ratio {min(values):.2f}-{max(values):.2f}, "
            f"sd(log) {spread:.3f}"
        )
    rng = random.Random(26)
    names = list(ratios)
    print("repeats  every headline  " + "  ".join(names))
    for n in repeats:
        every, each = 0, [0] * len(names)
        for _ in range(trials):
            outcome = [
                agree(
                    statistics.median(rng.choices(ratios[name], k=n)),
                    statistics.median(rng.choices(ratios[name], k=n)),
                )
                for name in names
            ]
            every += all(outcome)
            each = [c + o for c, o in zip(each, outcome)]
        print(
            f"{n:7d}  {every / trials:14.2f}  "
            + "  ".join(f"{c / trials:{len(name)}.2f}" for c, name in zip(each, names))
        )


if __name__ == "__main__":
    main(sys.argv[1:])
