#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
regime_summary.py - ratios of lull to its peers per cache-line regime.

On a VM the round trip between two vCPUs (throughput's c2c_round_trip_ns,
measured before each run) can jump between two levels from one minute to
the next, and the rings rank differently at each.  This reads the JSON of
repeated `throughput --runs 1 --json` invocations (one object per ring and
round; lines that are not results, such as {"round": N}, mark the rounds)
and prints, per regime, each ring's median rate and the median of the
per-round ratios lull-*/peer (lull-spsc against the SPSC peers, lull-mpsc
and lull-lanes against the others), counting only rounds in which both
rings saw the same regime.

With --ab OLD NEW it compares two builds instead: each ring's median in
OLD's rounds and in NEW's, per regime, and their ratio (NEW / OLD).

Usage: perf/regime_summary.py [--split-ns N] FILE...   (default split 300)
       perf/regime_summary.py [--split-ns N] --ab OLD.json NEW.json
"""
import json
import statistics
import sys

# Which peers each lull ring is compared with: the same class of ring.
SPSC_PEERS = ("ck-spsc", "rte-spsc", "boost-spsc", "boost-spsc-bulk")


def same_class(lull, peer):
    return (lull == "lull-spsc") == (peer in SPSC_PEERS)


def results(path):
    """The result objects of a file of rounds (the round markers left out)."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                obj = json.loads(line)
                if "msgs_per_s" in obj:
                    yield obj


def ab(old, new, split):
    print("%s -> %s, regimes split at c2c %d ns" % (old, new, split))
    rates = {}
    for which, path in (("old", old), ("new", new)):
        for obj in results(path):
            regime = "near" if obj["c2c_round_trip_ns"] < split else "far"
            name = "%s P%d %dB" % (obj["ring"], obj["producers"],
                                   obj["payload"])
            rates.setdefault((name, regime, which), []).append(
                obj["msgs_per_s"] / 1e6)
    rings = []
    for (ring, _, _) in rates:
        if ring not in rings:
            rings.append(ring)
    for regime in ("near", "far"):
        for ring in rings:
            o = rates.get((ring, regime, "old"), [])
            n = rates.get((ring, regime, "new"), [])
            if o and n:
                print("  %-4s %-22s old %6.1f (%d runs)  new %6.1f (%d runs)"
                      "  new/old %.2fx" %
                      (regime, ring, statistics.median(o), len(o),
                       statistics.median(n), len(n),
                       statistics.median(n) / statistics.median(o)))


def main(argv):
    split = 300
    files = []
    compare = False
    i = 0
    while i < len(argv):
        if argv[i] == "--split-ns":
            split = int(argv[i + 1])
            i += 2
            continue
        if argv[i] == "--ab":
            compare = True
            i += 1
            continue
        files.append(argv[i])
        i += 1
    if compare:
        if len(files) != 2:
            print(__doc__.strip(), file=sys.stderr)
            return 2
        ab(files[0], files[1], split)
        return 0
    if not files:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for path in files:
        rounds, cur = [], None
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                obj = json.loads(line)
                if "round" in obj:
                    cur = {}
                    rounds.append(cur)
                    continue
                if cur is None or "msgs_per_s" not in obj:
                    continue
                key = "%s P%d %dB%s" % (obj["ring"], obj["producers"],
                                        obj["payload"],
                                        " x%d" % obj["producer_batch"]
                                        if obj.get("producer_batch", 1) > 1
                                        else "")
                regime = "near" if obj["c2c_round_trip_ns"] < split else "far"
                cur[obj["ring"]] = (key, regime, obj["msgs_per_s"] / 1e6)
        print("%s: %d rounds, regimes split at c2c %d ns" %
              (path, len(rounds), split))
        rings = []
        for r in rounds:
            for name in r:
                if name not in rings:
                    rings.append(name)
        for regime in ("near", "far"):
            print("  %s (c2c %s %d ns):" %
                  (regime, "<" if regime == "near" else ">=", split))
            for name in rings:
                rates = [r[name][2] for r in rounds
                         if name in r and r[name][1] == regime]
                if rates:
                    print("    %-16s %3d runs  median %7.1f M msgs/s" %
                          (name, len(rates), statistics.median(rates)))
            for lull in [n for n in rings if n.startswith("lull-")]:
                for peer in [n for n in rings if not n.startswith("lull-")
                             and same_class(lull, n)]:
                    ratios = [r[lull][2] / r[peer][2] for r in rounds
                              if lull in r and peer in r and
                              r[lull][1] == regime and r[peer][1] == regime]
                    if ratios:
                        print("    %s / %s: median %.2fx over %d rounds "
                              "(%.2f..%.2f)" %
                              (lull, peer, statistics.median(ratios),
                               len(ratios), min(ratios), max(ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
