#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
line_rate.py - how fast each ring moves cache lines, from rounds of
`throughput --json` (the files throughput_ab.py reads; every build
pooled).

Where a ring is bound by moving its memory between the two CPUs, its time
per message divided by the 64-byte lines one message takes in its memory
is the same at every payload: the machine's price of a line, as that ring
moves them.  A target that needs a ring to move lines faster than it does
at any payload, or faster than any ring here does, is a target for
another machine.

Bytes one message takes, as throughput.c lays the rings out:
  lull-*                 its record: 8-byte header, payload, to 8 bytes;
                         with --producer-batch B, B items packed in one
                         array record share its 16 bytes of headers
  boost-*, moodycamel    the item: 8, 64 or 512 bytes, the next size up
  rte-*, ck-*            the 8-byte slot, and above 8 bytes the payload's
                         slab buffer (to 8 bytes)
  urcu-wfcq              its node: 16 bytes and the payload (at least 8)
Index and control lines are left out: per message they are a few per cent
of a line at most where lines are the bound.

Prints per configuration each ring's median ns per message over the
rounds, its bytes per message, and the ns per line.

Usage: perf/line_rate.py FILE...
"""
import statistics
import sys

import ab_rounds

ITEM_SIZES = (8, 64, 512)


def align8(n):
    return (n + 7) & ~7


def bytes_per_msg(ring, payload, batch):
    """The bytes of ring memory one message takes, or None if unknown."""
    if ring.startswith("lull-"):
        if batch > 1:
            return payload + 16.0 / batch
        return align8(8 + payload)
    if ring.startswith("boost-") or ring == "moodycamel":
        return next((s for s in ITEM_SIZES if s >= payload), None)
    if ring.startswith("rte-") or ring.startswith("ck-"):
        return 8 + (align8(payload) if payload > 8 else 0)
    if ring == "urcu-wfcq":
        return 16 + align8(max(payload, 8))
    return None


def main(paths):
    rounds = ab_rounds.read_rounds(
        paths, lambda obj: ((obj["payload"], obj["producers"],
                             obj.get("producer_batch", 1), obj["ring"]),
                            obj["ns_per_msg"]) if "ring" in obj else None)
    keys = list(dict.fromkeys(k for _, r in rounds for k in r))
    configs = list(dict.fromkeys(k[:3] for k in keys))
    for config in configs:
        payload, batch = config[0], config[2]
        print("payload %d, P %d, batch %d" % config)
        print("  %-16s %8s %8s %8s" % ("ring", "ns/msg", "B/msg", "ns/line"))
        for key in keys:
            if key[:3] != config:
                continue
            ring = key[3]
            ns = statistics.median(r[key] for _, r in rounds if key in r)
            size = bytes_per_msg(ring, payload, batch)
            per_line = "%8.2f" % (ns / (size / 64.0)) if size else "%8s" % "-"
            print("  %-16s %8.1f %8s %s" % (
                ring, ns, "%.0f" % size if size else "-", per_line))
        print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
