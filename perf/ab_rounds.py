# SPDX-License-Identifier: MIT
"""
ab_rounds.py - what handoff_ab.py and throughput_ab.py share: reading
files of a benchmark's `--json` output in rounds.  A line
{"round": R, "build": B} (any other keys are ignored) opens a round of
build B; each object after it that @entry keeps joins that round.
"""
import json


def read_rounds(paths, entry):
    """[(build, {key: value})] in the files' order; @entry(obj) gives
    (key, value) for an object to keep, or None."""
    rounds = []
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                obj = json.loads(line)
                if "round" in obj:
                    rounds.append((str(obj.get("build", "?")), {}))
                    continue
                kept = entry(obj) if rounds else None
                if kept is not None:
                    rounds[-1][1][kept[0]] = kept[1]
    return rounds
