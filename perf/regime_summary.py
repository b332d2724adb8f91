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

Each ring, producer count and payload is its own configuration.  With
--best, each lull ring is compared with the fastest peer of its class in
each round, not with each peer; a round counts where lull and that peer
saw the same regime.

With --ab OLD NEW it compares two builds instead: each ring's median in
OLD's rounds and in NEW's, per regime, and their ratio (NEW / OLD).

Usage: perf/regime_summary.py [--split-ns N] [--best] FILE...   (default split 300)
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


def read_rounds(path, split):
    """Each round's results: {(ring, producers, payload): (regime, M/s)}."""
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
            regime = "near" if obj["c2c_round_trip_ns"] < split else "far"
            cur[(obj["ring"], obj["producers"], obj["payload"])] = (
                regime, obj["msgs_per_s"] / 1e6)
    return rounds


def config_name(config):
    return "P%d %dB" % (config[0], config[1])


def summarize(path, split, best):
    rounds = read_rounds(path, split)
    print("%s: %d rounds, regimes split at c2c %d ns" %
          (path, len(rounds), split))
    keys = []
    for r in rounds:
        for key in r:
            if key not in keys:
                keys.append(key)
    configs = []
    for (_, producers, payload) in keys:
        if (producers, payload) not in configs:
            configs.append((producers, payload))
    rings = []
    for (ring, _, _) in keys:
        if ring not in rings:
            rings.append(ring)
    for regime in ("near", "far"):
        print("  %s (c2c %s %d ns):" %
              (regime, "<" if regime == "near" else ">=", split))
        for config in configs:
            for name in rings:
                key = (name,) + config
                rates = [r[key][1] for r in rounds
                         if key in r and r[key][0] == regime]
                if rates:
                    print("    %-16s %-9s %3d runs  median %7.1f M msgs/s" %
                          (name, config_name(config), len(rates),
                           statistics.median(rates)))
            for lull in [n for n in rings if n.startswith("lull-")]:
                peers = [n for n in rings
                         if not n.startswith("lull-") and same_class(lull, n)]
                groups = [[p] for p in peers]
                if best:
                    groups = [peers]
                for group in groups:
                    ratios, winners = [], set()
                    for r in rounds:
                        mine = r.get((lull,) + config)
                        theirs = [(r[(p,) + config][1], p) for p in group
                                  if (p,) + config in r]
                        if not mine or mine[0] != regime or not theirs:
                            continue
                        rate, winner = max(theirs)
                        if r[(winner,) + config][0] != regime:
                            continue
                        ratios.append(mine[1] / rate)
                        winners.add(winner)
                    if ratios:
                        print("    %s / %s %s: median %.2fx over %d rounds "
                              "(%.2f..%.2f)" %
                              (lull, "best of (%s)" % "/".join(sorted(winners))
                               if best else group[0], config_name(config),
                               statistics.median(ratios), len(ratios),
                               min(ratios), max(ratios)))


def main(argv):
    split = 300
    files = []
    compare = best = False
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
        if argv[i] == "--best":
            best = True
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
        summarize(path, split, best)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
