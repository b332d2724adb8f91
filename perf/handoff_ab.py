#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
handoff_ab.py - two builds of handoff, compared over interleaved rounds.

Reads a file of `handoff --json` output in which a line
{"round": R, "build": B} (any other keys are ignored) comes before each
invocation's objects, and prints per mechanism and build the medians over
the rounds of the pooled p50, the p99 and the consumer's CPU per message
(us), the median of the per-round ratios of each lull backend's p50 to
its own floor measured in the same invocation, and the ratio of the
second build's p50 median to the first's.  A lull mechanism run with the
fence park barrier (--barrier ...,fence) is listed apart, as NAME+fence.
Then, per build, the median (and range) of the per-round ratios of lull's
default (the mechanism "lull") to each event-loop peer in the file, at p50
and p99 (below 1: lull faster).

Usage: perf/handoff_ab.py FILE...
"""
import statistics
import sys

import ab_rounds

# Each lull backend against the bare kernel path it is built on.
FLOORS = {
    "lull": "uring-futex-floor",  # AUTO: uring-futex where io_uring works
    "lull-blocking": "futex-floor",
    "lull-uring-futex": "uring-futex-floor",
    "lull-uring-eventfd": "uring-eventfd-floor",
    "lull-epoll": "epoll-floor",
}

# What a user would pick instead of lull's default loop.
PEERS = ("msg-ring", "moodycamel-blocking", "uv-async")


def mechanism_of(obj):
    """The mechanism's name, with +fence where lull's park fenced."""
    name = obj["mechanism"]
    if name.startswith("lull") and obj.get("park_barrier") == "fence":
        name += "+fence"
    return name


def read_rounds(path):
    """[(build, {mechanism: result})] in the file's order."""
    return ab_rounds.read_rounds(
        [path], lambda obj: (mechanism_of(obj), obj)
        if "mechanism" in obj else None)


def median_of(rounds, build, mech, key, scale):
    vals = [r[mech][key] / scale for b, r in rounds if b == build and mech in r]
    return statistics.median(vals) if vals else None


def round_ratios(rounds, build, mech, other, key):
    return [r[mech][key] / r[other][key] for b, r in rounds
            if b == build and mech in r and other in r and r[other][key]]


def floor_ratio(rounds, build, mech):
    floor = FLOORS.get(mech.split("+")[0])
    vals = round_ratios(rounds, build, mech, floor, "p50_ns")
    return statistics.median(vals) if vals else None


def print_peers(rounds, builds):
    for b in builds:
        for peer in PEERS:
            parts = []
            for key in ("p50_ns", "p99_ns"):
                vals = round_ratios(rounds, b, "lull", peer, key)
                if vals:
                    parts.append("%s %.2fx (%.2f-%.2f)" % (
                        key[:3], statistics.median(vals), min(vals),
                        max(vals)))
            if parts:
                print("  %s lull / %s: %s" % (b, peer, ", ".join(parts)))


def summarize(path):
    rounds = read_rounds(path)
    builds = list(dict.fromkeys(b for b, _ in rounds))
    mechs = list(dict.fromkeys(m for _, r in rounds for m in r))
    counts = {b: sum(1 for x, _ in rounds if x == b) for b in builds}
    print("%s: %s" % (path, ", ".join("%s %d rounds" % (b, counts[b])
                                       for b in builds)))
    head = "%-24s" % "mechanism"
    for b in builds:
        head += " | %-31s" % (b + ": p50 / p99, CPU, floor")
    if len(builds) == 2:
        head += " | p50 %s/%s" % (builds[1], builds[0])
    print(head)
    for m in mechs:
        line = "%-24s" % m
        p50s = []
        for b in builds:
            p50 = median_of(rounds, b, m, "p50_ns", 1000.0)
            p99 = median_of(rounds, b, m, "p99_ns", 1000.0)
            cpu = median_of(rounds, b, m, "active_cpu_us_per_msg", 1.0)
            ratio = floor_ratio(rounds, b, m)
            p50s.append(p50)
            if p50 is None:
                line += " | %-31s" % "-"
                continue
            line += " | %6.2f / %6.1f, %5.2f, %-6s" % (
                p50, p99, cpu if cpu is not None else float("nan"),
                "%.2fx" % ratio if ratio is not None else "")
        if len(builds) == 2 and all(p50s):
            line += " | %.3f" % (p50s[1] / p50s[0])
        print(line)
    print_peers(rounds, builds)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    for path in argv[1:]:
        summarize(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
