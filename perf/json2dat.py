#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""json2dat.py - turn `throughput --json` or `handoff --json` output into
gnuplot data.

Usage: perf/json2dat.py RESULTS.json OUTDIR

RESULTS.json holds one JSON object per line (other lines are skipped, so a
log with the table mixed in works too).  Objects with a "ring" field are
throughput results, those with a "mechanism" field handoff results.
Blocks in a .dat file are separated by two blank lines, so gnuplot's
`index` picks one.  Writes, in OUTDIR, for throughput:

  throughput_<payload>.dat  one data block per ring, rows: producers,
                            M msgs/s median, min, max, wakes per message
  throughput.gpi            gnuplot variables: payloads = "8 64 512" and,
                            per payload, rings_<payload> = "lull-spsc ..."
                            in block order

then perf/plot_throughput.gp draws them; and for handoff:

  handoff_cdf.dat           one data block per mechanism (its label), rows:
                            latency in us, fraction of messages delivered
                            within it, fraction slower (from the "cdf"
                            array)
  handoff_idle.dat          one row per mechanism: position, label, group
                            (0 polls, 1 lull, 2 bare floor, 3 another
                            library's queue), idle wake-ups
                            per second, idle CPU ms per window (medians)
  handoff.gpi               gnuplot variables: labels and mechs (in block
                            order), and the run's settings for the titles

then perf/plot_handoff.gp draws them.
"""
import json
import os
import sys

# lull first, then the peers in the order the benchmark lists them.
ORDER = ["lull-spsc", "lull-mpsc", "ck-spsc", "ck-mpmc", "ck-mpsc",
         "rte-spsc", "rte-mpsc", "urcu-wfcq", "boost-spsc", "boost-spsc-bulk",
         "moodycamel", "pipe", "eventfd"]
# handoff's mechanisms built on other libraries' queues.
LIBRARIES = ["moodycamel-blocking", "uv-async", "msg-ring"]
# handoff's kernel ways between processes (lull's and the floor's are in
# the lull and floor groups).
KERNEL_XPROC = ["unix-xproc", "pipe-xproc"]


def ring_key(name):
    return (ORDER.index(name) if name in ORDER else len(ORDER), name)


def mech_group(mech):
    if mech.startswith("lull"):
        return 1
    if mech.endswith("-floor"):
        return 2
    if mech in LIBRARIES:
        return 3
    if mech in KERNEL_XPROC:
        return 4
    return 0


def handoff(results, src, outdir):
    results = [r for r in results if r.get("runs")]
    if not results:
        sys.stderr.write("json2dat: no handoff results in %s\n" % src)
        return 1
    labels = [r.get("label", r["mechanism"]) for r in results]
    with open(os.path.join(outdir, "handoff_cdf.dat"), "w",
              encoding="utf-8") as out:
        out.write("# per mechanism: latency us, fraction within, "
                  "fraction slower\n")
        for i, r in enumerate(results):
            if i:
                out.write("\n\n")
            out.write("# %s\n" % labels[i])
            cdf = r.get("cdf") or [[0.5, r["p50_ns"]], [0.99, r["p99_ns"]],
                                   [0.999, r["p999_ns"]], [1, r["max_ns"]]]
            for q, ns in cdf:
                # 1 - q is never 0 on the tail's log axis: the maximum is
                # drawn at one sample's share.
                tail = max(1 - q, 1.0 / max(r.get("samples", 1), 1))
                out.write("%.4f %.6g %.6g\n" % (max(ns, 1) / 1e3, q, tail))
    with open(os.path.join(outdir, "handoff_idle.dat"), "w",
              encoding="utf-8") as out:
        out.write("# position, label, group (0 polls, 1 lull, 2 floor, "
                  "3 library, 4 kernel across processes), "
                  "idle wake-ups/s, idle CPU ms per %g s (medians)\n"
                  % results[0].get("idle_seconds", 2))
        for i, r in enumerate(results):
            out.write("%d %s %d %.6g %.6g\n" % (
                i, labels[i], mech_group(r["mechanism"]),
                r.get("idle_wakeups_per_s",
                      r["idle_wakeups"] / r.get("idle_seconds", 2)),
                r["idle_cpu_ms"]))
    first = results[0]
    gpi = ["# written by perf/json2dat.py from %s" % os.path.basename(src),
           'labels = "%s"' % " ".join(labels),
           'mechs = "%s"' % " ".join(r["mechanism"] for r in results),
           'pin = "%s"' % first.get("pin", "?"),
           "runs = %d" % first.get("runs", 0),
           "messages = %d" % first.get("messages", 0),
           "max_gap_us = %g" % first.get("max_gap_us", 0),
           "idle_seconds = %g" % first.get("idle_seconds", 2)]
    for r in results:
        if r.get("safety_timeout_ms") is not None:
            gpi.append("safety_ms = %g" % r["safety_timeout_ms"])
            break
    for r in results:
        if r.get("poll_interval_us") is not None:
            gpi.append("poll_us = %g" % r["poll_interval_us"])
            break
    with open(os.path.join(outdir, "handoff.gpi"), "w",
              encoding="utf-8") as out:
        out.write("\n".join(gpi) + "\n")
    return 0


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
    if "mechanism" in results[0]:
        return handoff([r for r in results if "mechanism" in r], src, outdir)
    results = [r for r in results if "ring" in r]

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
