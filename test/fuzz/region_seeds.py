#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the seed corpora of the hostile-region fuzzers into
test/fuzz/corpus/region_read/ and test/fuzz/corpus/region_open/, where
they are kept in the repository: rings in each topology with records,
paddings, batches, claims, shutdowns and fatal reports, and the
corruptions test/test_region_hostile.c checks one by one, so that fuzzing
starts from every path the consumer is known to take.

region_read's seeds are scripts (see fuzz_region_read.c for the steps);
region_open's are whole regions, byte for byte, laid out here as
lib/region.h says (LAYOUT_VERSION below: keep it equal to
LULL_LAYOUT_VERSION, or every region_open seed stops at the version check).

Usage: test/fuzz/region_seeds.py [OUTDIR]   (default test/fuzz/corpus)
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

LAYOUT_VERSION = 6
SPSC, MPSC, LANES = 1, 2, 3
MORE = 0x40000000
POISON, FATAL = -1, -2
ARRAY = -8  # a write_array packed into one record (lib/region.h)

# --- region_read: scripts ------------------------------------------------

FIELDS = {"head": 0, "tail": 1, "busy": 2, "owner": 3, "park": 4,
          "state": 5, "fatal.length": 6, "fatal_state": 7, "fatal.code": 8,
          "wake_fd": 9, "wake_pid": 10, "park_fence": 11, "space_waiters": 12,
          "space_seq": 13, "consumer": 14, "producers": 15, "magic": 16,
          "layout_version": 17, "mode": 18, "flags": 19, "capacity": 20,
          "region_size": 21, "data_offset": 22, "lanes": 23,
          "head+": 24, "tail+": 25}
CLOSED, DISCARD, STATE_FATAL, SEALED = 1, 2, 4, 16


# Slot fields (fuzz_region_read.c, field_store()): the slot in bits 5-7.
SLOT_FIELDS = {"state": 26, "pid": 27, "lane": 28, "phase": 29,
               "start": 30, "end": 31}
LIVE, DEAD = 2, 3
TRYING, OWNED = 1, 2
NO_SUCH_PID = 0x3ffffff0  # above pid_max: a producer that is gone


class Script:
    """One region_read input: the ring, then steps."""

    def __init__(self, topology, capacity, shared=False):
        topo = {"spsc": 0, "mpsc": 1, "lanes2": 2, "lanes3": 3}[topology]
        cap = {256: 0, 512: 1, 1024: 2, 4096: 3}[capacity]
        self.b = bytearray([topo | cap << 2 | (16 if shared else 0)])

    def slot(self, index, **fields):
        """A producer slot of a shared region: state, pid, lane, phase,
        start, end."""
        for name, value in fields.items():
            self.b += bytes([2, SLOT_FIELDS[name] | index << 5]) + \
                struct.pack("<Q", value & (2 ** 64 - 1))
        return self

    def poke(self, offset, data):
        self.b += bytes([0]) + struct.pack("<HB", offset, len(data)) + data
        return self

    def header(self, lane, offset, length, rtype):
        assert offset % 8 == 0
        self.b += bytes([1, lane]) + struct.pack("<Hii", offset // 8,
                                                 length, rtype)
        return self

    def record(self, lane, offset, payload, rtype=1, more=False):
        """A committed record: its header, then its payload (a poke)."""
        self.poke_data(lane, offset + 8, payload)
        return self.header(lane, offset, (8 + len(payload)) |
                           (MORE if more else 0), rtype)

    def poke_data(self, lane, offset, data):
        # Lane data starts at 1024 + 256 * lanes + lane * capacity: the
        # scripts below only poke payloads of 256-byte SPSC/MPSC rings.
        return self.poke(1280 + offset, data) if data else self

    def field(self, name, value, lane=0):
        self.b += bytes([2, FIELDS[name] | lane << 5]) + \
            struct.pack("<Q", value & (2 ** 64 - 1))
        return self

    def read(self, limit=255, verdicts=0):
        self.b += bytes([3, limit, verdicts])
        return self

    def peek(self):
        self.b += bytes([4])
        return self

    def release(self):
        self.b += bytes([5])
        return self

    def wait(self):
        self.b += bytes([6])
        return self

    def readable(self):
        self.b += bytes([7])
        return self

    def shutdown(self, how):
        self.b += bytes([8, {"graceful": 0, "immediate": 1, "fatal": 2}[how]])
        return self

    def reopen(self):
        self.b += bytes([9])
        return self

    def drain(self):
        return self.readable().wait().read().read().read()


def read_seeds():
    s = {}
    s["records"] = (Script("spsc", 256).record(0, 0, b"hello")
                    .record(0, 16, b"").record(0, 24, b"x" * 20, 7)
                    .drain().shutdown("graceful").drain())
    s["peek-release"] = (Script("spsc", 256).record(0, 0, b"abc")
                         .record(0, 16, b"def").peek().peek().release()
                         .peek().release().peek().wait().read())
    # Head near the end: a padding to the end, then a record at 0.
    s["wrap"] = (Script("spsc", 256).field("head", 224)
                 .field("tail", 224).header(0, 224, 32, 0)
                 .record(0, 0, b"after the wrap").field("tail", 280)
                 .drain().shutdown("graceful").drain())
    s["mpsc-claimed"] = (Script("mpsc", 256).record(0, 0, b"one")
                         .header(0, 16, -16, 1).read().readable()
                         .header(0, 16, 16, 1).read()
                         .shutdown("graceful").drain())
    # Packed arrays: three items of 8 bytes read in part, peeked, and
    # cut by an immediate shutdown; one whose header lies.
    items = struct.pack("<iI", 5, 8) + b"item-one" + b"item-two" + b"item-thr"
    s["array"] = (Script("spsc", 256).record(0, 0, items, ARRAY)
                  .record(0, 40, b"after").read(2).peek().release()
                  .read().shutdown("graceful").drain())
    s["array-immediate"] = (Script("mpsc", 256).record(0, 0, items, ARRAY)
                            .record(0, 40, items, ARRAY).read(1)
                            .shutdown("immediate").drain())
    s["array-lies"] = (Script("spsc", 256)
                       .record(0, 0, struct.pack("<iI", 5, 12) + b"x" * 24,
                               ARRAY).read().drain())
    s["batch"] = (Script("spsc", 256).record(0, 0, b"a", more=True)
                  .record(0, 16, b"b", more=True).record(0, 32, b"c")
                  .read(1).shutdown("immediate").drain())
    s["lanes"] = (Script("lanes2", 256).header(0, 0, 12, 1)
                  .header(1, 0, 12, 2).header(1, 16, 8, 3).read(2)
                  .peek().release().read().shutdown("graceful").drain())
    s["lanes3-tails"] = (Script("lanes3", 512).header(2, 0, 16, 1)
                         .field("tail", 16, lane=2).field("state", CLOSED)
                         .drain())
    s["fatal"] = (Script("mpsc", 256).record(0, 0, b"before")
                  .shutdown("fatal").drain())
    s["closed-busy"] = (Script("spsc", 256).field("busy", 1)
                        .field("state", CLOSED).drain().field("busy", 0)
                        .drain())
    s["reopen"] = (Script("spsc", 256).record(0, 0, b"kept").read(1, 2)
                   .reopen().read().reopen().field("head", 8).read())
    # The corruptions of test_region_hostile.c.
    s["length-2000"] = (Script("spsc", 4096).header(0, 0, 2000, 1)
                        .drain())
    s["length-past-end"] = (Script("spsc", 256).field("head", 248)
                            .field("tail", 248).header(0, 248, 16, 1)
                            .drain())
    s["length-short"] = Script("mpsc", 256).header(0, 0, 3, 1).drain()
    s["padding-huge"] = (Script("spsc", 256).header(0, 0, 0x3ffffff8, 0)
                         .drain())
    s["reserved-type"] = (Script("spsc", 256).header(0, 0, 8, POISON)
                          .drain())
    s["fatal-type"] = Script("lanes2", 256).header(1, 0, 16, FATAL).drain()
    s["after-records"] = (Script("spsc", 256).record(0, 0, b"good")
                          .header(0, 16, 2000, 1).read().read().drain())
    s["past-the-lap"] = (Script("spsc", 256).field("head", 8)
                         .field("tail", 8).header(0, 8, 248, 0)
                         .header(0, 0, 32, 1).drain())
    s["tail-far"] = (Script("spsc", 256).field("tail", 1 << 40)
                     .field("state", CLOSED).drain())
    s["tail-unaligned"] = (Script("lanes2", 256).field("tail", 3, lane=1)
                           .field("state", CLOSED).drain())
    s["mpsc-tail-behind"] = (Script("mpsc", 256).field("head", 64)
                             .field("tail", 8 | 1).field("state", CLOSED)
                             .drain())
    s["fatal-length"] = (Script("spsc", 256).field("fatal_state", 1)
                         .field("fatal.length", 0xffffffff)
                         .field("state", CLOSED | STATE_FATAL).drain())
    s["head-unaligned"] = (Script("spsc", 256).field("head", 5)
                           .record(0, 0, b"x").read())
    s["lanes-lie"] = (Script("lanes2", 256).field("lanes", 64).read()
                      .reopen().read())
    s["wake-fd"] = (Script("spsc", 256).field("park", 2)
                    .field("wake_fd", 1).field("wake_pid", 1)
                    .field("park_fence", 1).header(0, 0, 2000, 1).drain())
    # Shared regions: producers whose process is gone, recovered.
    s["shared-dead-owned-claim"] = (
        Script("mpsc", 256, shared=True).record(0, 0, b"one")
        .header(0, 16, -16, 1).field("tail", 48).record(0, 32, b"two")
        .slot(0, pid=NO_SUCH_PID, phase=OWNED, start=16, end=32,
              state=LIVE)
        .drain().drain())
    s["shared-dead-trying"] = (
        Script("mpsc", 256, shared=True).record(0, 0, b"one")
        .field("tail", 48).record(0, 32, b"two")
        .slot(1, pid=NO_SUCH_PID, phase=TRYING, start=16, end=32,
              state=LIVE)
        .drain().drain())
    s["shared-dead-lane"] = (
        Script("lanes2", 256, shared=True).header(1, 0, 16, 1)
        .header(1, 16, 16 | MORE, 1).header(1, 40, 16, 1)
        .field("owner", 1, lane=1)
        .slot(2, pid=NO_SUCH_PID, lane=1, state=LIVE)
        .drain().drain())
    s["shared-hostile-span"] = (
        Script("mpsc", 256, shared=True).field("tail", 32)
        .slot(0, pid=NO_SUCH_PID, phase=OWNED, start=0, end=1 << 40,
              state=LIVE)
        .drain())
    return {k: bytes(v.b) for k, v in s.items()}


# --- region_open: whole regions --------------------------------------------

def region(mode, capacity, lanes=1):
    """An empty region as lull_ring_create_in() lays it out."""
    data_offset = 1024 + 256 * lanes
    size = data_offset + lanes * capacity
    r = bytearray(size)
    struct.pack_into("<IIIIQQQI", r, 0, 0x6c756c6c, LAYOUT_VERSION, mode, 0,
                     capacity, size, data_offset, lanes)
    struct.pack_into("<i", r, 392, -1)  # wake_fd
    return r


def put(r, lane, pos, length, rtype, payload=b"", capacity=256, lanes=1):
    base = 1024 + 256 * lanes + lane * capacity + pos % capacity
    struct.pack_into("<ii", r, base, length, rtype)
    r[base + 8:base + 8 + len(payload)] = payload


def lane_set(r, lane, tail=None, head=None, busy=None):
    base = 1024 + 256 * lane
    if tail is not None:
        struct.pack_into("<Q", r, base, tail)
    if busy is not None:
        struct.pack_into("<I", r, base + 8, busy)
    if head is not None:
        struct.pack_into("<Q", r, base + 128, head)


def fatal(r, code, message, length=None):
    """A fatal report: fatal_state at 512, struct lull_fatal at 520."""
    struct.pack_into("<IiI", r, 512, 1, 0, 0)
    struct.pack_into("<iI", r, 520, code,
                     len(message) if length is None else length)
    r[528:528 + len(message)] = message


def open_seeds():
    s = {}
    s["spsc-empty"] = region(SPSC, 256)
    s["mpsc-empty"] = region(MPSC, 256)
    s["lanes3-empty"] = region(LANES, 256, 3)
    r = region(SPSC, 256)
    put(r, 0, 0, 13, 1, b"hello")
    put(r, 0, 16, 8, 2)
    lane_set(r, 0, tail=24)
    s["spsc-records"] = r
    r = region(MPSC, 256)
    put(r, 0, 200, 16, 1, b"12345678")
    put(r, 0, 216, 40, 0)
    put(r, 0, 0, 16 | MORE, 3, b"batch")
    put(r, 0, 16, 12, 3, b"end")
    lane_set(r, 0, tail=256 + 32, head=200)
    s["mpsc-wrap-batch"] = r
    r = region(MPSC, 256)
    put(r, 0, 0, -16, 1)
    lane_set(r, 0, tail=16)
    s["mpsc-claimed"] = r
    r = region(LANES, 256, 2)
    put(r, 0, 0, 12, 1, b"abcd", lanes=2)
    put(r, 1, 0, 12, 2, b"efgh", lanes=2)
    lane_set(r, 0, tail=16)
    lane_set(r, 1, tail=16)
    s["lanes2-records"] = r
    r = region(SPSC, 256)
    put(r, 0, 0, 12, 1, b"last")
    lane_set(r, 0, tail=16)
    struct.pack_into("<I", r, 388, CLOSED)
    s["spsc-closed"] = r
    r = region(MPSC, 256)
    lane_set(r, 0, tail=1)
    struct.pack_into("<I", r, 388, CLOSED | STATE_FATAL)
    fatal(r, 42, b"oops")
    s["mpsc-fatal"] = r
    # The corruptions.
    r = region(SPSC, 4096)
    put(r, 0, 0, 2000, 1, capacity=4096)
    s["length-2000"] = r
    r = region(SPSC, 256)
    put(r, 0, 0, 0x3ffffff8, 0)
    s["padding-huge"] = r
    r = region(SPSC, 256)
    put(r, 0, 0, 16, POISON)
    s["reserved-type"] = r
    r = region(SPSC, 256)
    lane_set(r, 0, tail=1 << 40)
    struct.pack_into("<I", r, 388, CLOSED)
    s["tail-far"] = r
    r = region(SPSC, 256)
    struct.pack_into("<I", r, 388, CLOSED | STATE_FATAL)
    fatal(r, 1, b"A" * 256, length=0xffffffff)
    s["fatal-length"] = r
    r = region(LANES, 256, 2)
    struct.pack_into("<I", r, 40, 3)
    s["lanes-lie"] = r
    r = region(LANES, 256, 3)
    struct.pack_into("<I", r, 8, LANES | 3 << 8)  # flags, not a mode word
    s["mode-flags"] = r
    r = region(SPSC, 256)
    lane_set(r, 0, head=12)
    s["head-unaligned"] = r
    r = region(SPSC, 256)
    struct.pack_into("<Q", r, 24, 1 << 40)
    s["size-lie"] = r
    # An array record of its header alone in the lane's last 8 bytes,
    # where the region ends: no array header to read after it.
    r = region(SPSC, 256)
    put(r, 0, 248, 8, ARRAY)
    lane_set(r, 0, tail=256, head=248)
    s["array-header-at-region-end"] = r
    return {k: bytes(v) for k, v in s.items()}


# Inputs a fuzzer found, kept in the corpus as it wrote them.
FOUND = {"empty-record-at-lane-end"}


def write(directory, seeds):
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        if name not in FOUND:
            os.unlink(os.path.join(directory, name))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    if len(sys.argv) > 2:
        sys.exit(__doc__)
    out = sys.argv[1] if len(sys.argv) == 2 else os.path.join(HERE, "corpus")
    write(os.path.join(out, "region_read"), read_seeds())
    write(os.path.join(out, "region_open"), open_seeds())
