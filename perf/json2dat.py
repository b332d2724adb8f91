#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""json2dat.py - turn `throughput --json` output into gnuplot data.

Usage: perf/json2dat.py RESULTS.json OUTDIR

RESULTS.json holds one JSON object per line (other lines are skipped, so a
log with the table mixed in works too).  Writes, in OUTDIR:

  throughput_<payload>.dat  one data block per ring (blocks separated by two
                            blank lines, so gnuplot's `index` picks a ring),
                            rows: producers, M msgs/s median, min, max,
                            wakes per message
  throughput.gpi            gnuplot variables: payloads = "8 64 512" and,
                            per payload, rings_<payload> = "lull-spsc ..."
                            in block order

then perf/plot_throughput.gp draws them.
"""
import json
import os
import sys

# lull first, then the peers in the order the benchmark lists them.
ORDER = ["lull-spsc", "lull-mpsc", "ck-spsc", "ck-mpmc", "ck-mpsc",
         "rte-spsc", "rte-mpsc", "urcu-wfcq", "pipe", "eventfd"]


def ring_key(name):
    return (ORDER.index(name) if name in ORDER else len(ORDER), name)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    src, outdir = argv[1], argv[2]
    results = []
    with open(src, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                results.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    if not results:
        sys.stderr.write("json2dat: no results in %s\n" % src)
        return 1
    os.makedirs(outdir, exist_ok=True)

    by_payload = {}
    for r in results:
        by_payload.setdefault(r["payload"], {}).setdefault(
            r["ring"], []).append(r)

    gpi = ["# written by perf/json2dat.py from %s" % os.path.basename(src)]
    payloads = sorted(by_payload)
    gpi.append('payloads = "%s"' % " ".join(str(p) for p in payloads))
    for payload in payloads:
        rings = sorted(by_payload[payload], key=ring_key)
        path = os.path.join(outdir, "throughput_%d.dat" % payload)
        with open(path, "w", encoding="utf-8") as out:
            out.write("# payload %d bytes; per ring: producers, M msgs/s "
                      "(median, min, max), wakes/msg\n" % payload)
            for i, ring in enumerate(rings):
                if i:
                    out.write("\n\n")
                out.write("# %s\n" % ring)
                for r in sorted(by_payload[payload][ring],
                                key=lambda r: r["producers"]):
                    out.write("%d %.6f %.6f %.6f %.6g\n" % (
                        r["producers"], r["msgs_per_s"] / 1e6,
                        r.get("msgs_per_s_min", r["msgs_per_s"]) / 1e6,
                        r.get("msgs_per_s_max", r["msgs_per_s"]) / 1e6,
                        r.get("wakes_per_msg", 0)))
        gpi.append('rings_%d = "%s"' % (payload, " ".join(rings)))
    with open(os.path.join(outdir, "throughput.gpi"), "w",
              encoding="utf-8") as out:
        out.write("\n".join(gpi) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
