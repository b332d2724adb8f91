#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
summarize.py - the wake-up's stages, from handoff built with stages.patch.

Reads files in which "== round R MECHANISM" comes before each handoff
invocation's output (one mechanism, --runs 1), and prints per mechanism
the median over the rounds of each stage's p50 (ns): the producer from
its timestamp to its wake-up system call, that call to the consumer's
return from its sleep, that return to the handler; their sum, and the
median of the invocations' pooled p50.

Usage: summarize.py stages-same.txt [stages-cross.txt ...]
"""
import collections
import re
import statistics
import sys

for path in sys.argv[1:]:
    mechs = collections.OrderedDict()
    cur = None
    for line in open(path):
        m = re.match(r"== round (\d+) (\S+)", line)
        if m:
            cur = mechs.setdefault(m.group(2), collections.defaultdict(list))
            name = m.group(2)
            continue
        m = re.match(r"stage (\d) .*: (\d+) woken, p50 (\d+) ns", line)
        if m and cur is not None:
            cur["stage%s" % m.group(1)].append(int(m.group(3)))
            continue
        m = re.match(r"(\S+)\s+: mean=.*p50=\s*([\d.]+)us", line)
        if m and cur is not None and m.group(1) == name:
            cur["p50"].append(float(m.group(2)) * 1000)
    print(path)
    print("%-20s %10s %12s %15s %8s %8s" % ("mechanism", "push>call",
          "call>return", "return>handler", "sum", "p50"))
    for mech, v in mechs.items():
        s = [statistics.median(v["stage%d" % i]) for i in range(3)]
        print("%-20s %10.0f %12.0f %15.0f %8.0f %8.0f" % (
            mech, s[0], s[1], s[2], sum(s), statistics.median(v["p50"])))
