#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
throughput_ab.py - one build of throughput or two, compared over
interleaved rounds.

Reads files of `throughput --json` output in which a line
{"round": R, "build": B} (any other keys are ignored) comes before each
invocation's objects, and prints per configuration (payload, producers,
producer batch, pinning) and ring the median over the rounds of each
build's M msgs/s with its range, the ratio of the second build's median to
the first's, and, per build, the median of the per-round ratios of each
lull ring to each peer measured in the same invocation (> 1: lull faster).

Usage: perf/throughput_ab.py FILE...
"""
import statistics
import sys

import ab_rounds


def config_of(obj):
    return (obj["payload"], obj["producers"], obj.get("producer_batch", 1),
            obj.get("pinned", False))


def read_rounds(paths):
    """[(build, {(config, ring): msgs_per_s})] in the files' order."""
    return ab_rounds.read_rounds(
        paths, lambda obj: ((config_of(obj), obj["ring"]), obj["msgs_per_s"])
        if "ring" in obj else None)


def fmt_config(config):
    payload, producers, batch, pinned = config
    return "payload %d, P %d, batch %d%s" % (payload, producers, batch,
                                             ", pinned" if pinned else "")


def summarize(paths):
    rounds = read_rounds(paths)
    builds = list(dict.fromkeys(b for b, _ in rounds))
    keys = list(dict.fromkeys(k for _, r in rounds for k in r))
    configs = list(dict.fromkeys(c for c, _ in keys))
    for config in configs:
        rings = [ring for c, ring in keys if c == config]
        print(fmt_config(config))
        print("  %-16s" % "ring" + "".join(
            "  %-24s" % ("%s M msgs/s (range)" % b) for b in builds) +
            ("  %s/%s" % (builds[-1], builds[0]) if len(builds) > 1 else ""))
        medians = {}
        for ring in rings:
            line = "  %-16s" % ring
            for b in builds:
                vals = [r[(config, ring)] / 1e6 for bb, r in rounds
                        if bb == b and (config, ring) in r]
                if not vals:
                    line += "  %-24s" % "-"
                    continue
                medians[(b, ring)] = statistics.median(vals)
                line += "  %-24s" % ("%7.2f (%.2f-%.2f) n=%d" % (
                    medians[(b, ring)], min(vals), max(vals), len(vals)))
            if len(builds) > 1 and (builds[0], ring) in medians and \
                    (builds[-1], ring) in medians:
                line += "  %.2fx" % (medians[(builds[-1], ring)] /
                                     medians[(builds[0], ring)])
            print(line)
        lulls = [ring for ring in rings if ring.startswith("lull-")]
        peers = [ring for ring in rings if not ring.startswith("lull-")]
        for b in builds:
            for lull in lulls:
                ratios = []
                for peer in peers:
                    vals = [r[(config, lull)] / r[(config, peer)]
                            for bb, r in rounds if bb == b and
                            (config, lull) in r and (config, peer) in r and
                            r[(config, peer)]]
                    if vals:
                        ratios.append("%s %.2fx (%.2f-%.2f)" % (
                            peer, statistics.median(vals), min(vals),
                            max(vals)))
                if ratios:
                    print("  %s %s / peer: %s" % (b, lull, ", ".join(ratios)))
        print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    summarize(sys.argv[1:])
