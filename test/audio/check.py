#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks for test/audio/run.sh that are clearer in Python than in sh.

Each subcommand exits 0 when the check holds, and otherwise prints why and
exits 1.  Standard library only.

  load LEVELS LOG N C TEXT...     audio-loadgen --json/--log output: one
                                  level, N requests at concurrency C, no
                                  errors, every stream 200 and plausible
  pace LEVELS RTF_LO RTF_HI TTFP_MAX_MS
                                  the level's mean real-time factor lies in
                                  [RTF_LO, RTF_HI] and its TTFP p99 is at
                                  most TTFP_MAX_MS
  levels LEVELS LOG N W C...      a run without --concurrency: one line per
                                  level C, N requests each, W warm-ups
                                  logged apart and left out of the counts
  faults LEVELS KIND=COUNT...     the level's errors_by_kind is exactly this
  ab LEVELS MODE=C...             audio-loadgen --ab --json output: one line
                                  per side MODE and concurrency C, in this
                                  order, none with errors
  drained LOG MIN_OK              after SIGTERM under load: every stream
                                  that got 200 is intact, the rest were
                                  refused (no response) or got 503; at
                                  least MIN_OK streams completed
  cut LOG                         one stream, cut by the drain deadline: it
                                  must end in speech.audio.error
  wav FILE TEXT                   a RIFF/WAVE file of 24 kHz s16 mono PCM
  pcm FILE TEXT                   raw s16 PCM of plausible length
  sse FILE TEXT                   a raw SSE body (curl -N output): deltas,
                                  then done; prints the decoded PCM bytes
  page FILE TEXT                  Chromium's --dump-dom of the page: it
                                  streamed TEXT, decoded its samples and
                                  handed every one of them to Web Audio;
                                  it drew the waveform and its 6 charts,
                                  and named the worker that served it
  page_killed FILE                the page with ?kill=1 against a server
                                  with --demo-controls: it killed its
                                  stream's worker, and the stream ended
                                  with that worker's death as its error
  screenshot PNG                  Chromium's --screenshot of the page
                                  after a stream: the waveform's green and
                                  the charts' blue are on it
  rawstream HOST:PORT TEXT        stream_format audio under --pace
                                  realtime: the PCM arrives chunk by chunk
                                  over the audio's duration, not at once
  voices HOST:PORT                every voice the server names (and the
                                  page offers) speaks, each differently;
                                  speed 2 is shorter than 1, 0.5 longer
  garbage HOST:PORT               malformed HTTP: each gets its 4xx/5xx
                                  status and a JSON error, then a close
  chaos HOST:PORT SECONDS COUNT SEED
                                  a random-garbage client for SECONDS or
                                  COUNT connections: truncated requests,
                                  random bytes, huge header names split
                                  across writes, oversized URLs and
                                  bodies, mutated requests, silent
                                  half-open connections; the oversized
                                  ones must get 414/431/413
  limits HOST:PORT IDLE_S         with --max-connections 2: a third
                                  connection gets 503; with --idle-timeout
                                  IDLE_S an idle connection is closed
  http10 HOST:PORT TEXT           an HTTP/1.0 stream: no chunking, the
                                  body ends with the connection
  keepalive MODE HOST:PORT TEXT   one connection: GET (sequential) or two
                                  pipelined GETs, a streamed POST, a GET
  error_json FILE                 {"error": {"message": "...", ...}}
  health FILE                     /health JSON with status "ok"
  metric FILE NAME [LABEL]        prints the sum of a Prometheus metric
                                  (only the series whose labels contain
                                  LABEL, e.g. 'ring="chunks"')
  metrics_format FILE [NAME...]   every sample line is well formed, every
                                  family has a TYPE, each NAME is there
"""
import base64
import hashlib
import json
import random
import re
import socket
import struct
import sys
import time

RATE = 24000
# English speech from espeak-ng at speeds near 1.0: roughly 10-20
# characters a second.  Wide bounds: a check for nonsense, not a benchmark.
CHARS_PER_S = (3.0, 45.0)
ABS_S = (0.3, 20.0)


def bad(msg):
    print(msg)
    sys.exit(1)


def plausible(seconds, text, what):
    lo, hi = ABS_S
    if not lo <= seconds <= hi:
        bad(f"{what}: {seconds:.3f} s of audio for {len(text)} characters "
            f"(want {lo}-{hi} s)")
    rate = len(text) / seconds
    if not CHARS_PER_S[0] <= rate <= CHARS_PER_S[1]:
        bad(f"{what}: {seconds:.3f} s for {len(text)} characters is "
            f"{rate:.1f} characters/s (want {CHARS_PER_S[0]}-"
            f"{CHARS_PER_S[1]})")


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def cmd_load(levels, log, n, c, *texts):
    n, c = int(n), int(c)
    lv = lines(levels)
    if len(lv) != 1:
        bad(f"{len(lv)} JSON level lines, want 1")
    L = lv[0]
    for key in ("concurrency", "requests", "errors", "ttfp_p50_ms",
                "ttfp_p99_ms", "e2e_p50_ms", "e2e_p99_ms", "audio_s",
                "rtf_mean"):
        if key not in L:
            bad(f"level line lacks '{key}': {L}")
    if L["concurrency"] != c or L["requests"] != n:
        bad(f"level is c={L['concurrency']} n={L['requests']}, "
            f"want c={c} n={n}")
    if L["errors"] or L["warmup_errors"] or L["ok"] != n:
        bad(f"{L['errors']} errors ({L['errors_by_kind']}), "
            f"{L['ok']} ok of {n}")
    reqs = [r for r in lines(log) if not r["warmup"]]
    if len(reqs) != n:
        bad(f"{len(reqs)} requests logged, want {n}")
    for r in reqs:
        text = texts[r["sentence"]]
        if r["status"] != 200 or not r["ok"]:
            bad(f"request {r['id']}: {r}")
        plausible(r["audio_s"], text, f"request {r['id']}")
        if not 0 < r["ttfp_ms"] <= r["e2e_ms"]:
            bad(f"request {r['id']}: TTFP {r['ttfp_ms']} E2E {r['e2e_ms']}")
    print(f"{n} streams, {L['audio_s']:.1f} s of audio, TTFP p50 "
          f"{L['ttfp_p50_ms']:.1f} ms p99 {L['ttfp_p99_ms']:.1f} ms, E2E "
          f"p50 {L['e2e_p50_ms']:.1f} ms p99 {L['e2e_p99_ms']:.1f} ms")


def cmd_pace(levels, lo, hi, ttfp_max):
    L = lines(levels)[0]
    lo, hi, ttfp_max = float(lo), float(hi), float(ttfp_max)
    if not lo <= L["rtf_mean"] <= hi:
        bad(f"mean real-time factor {L['rtf_mean']} (E2E / audio "
            f"seconds), want {lo}-{hi}")
    if L["ttfp_p99_ms"] > ttfp_max:
        bad(f"TTFP p99 {L['ttfp_p99_ms']} ms, want at most {ttfp_max} ms")
    print(f"real-time factor {L['rtf_mean']}, TTFP p99 "
          f"{L['ttfp_p99_ms']} ms")


def cmd_levels(levels, log, n, w, *conc):
    n, w, conc = int(n), int(w), [int(c) for c in conc]
    lv = lines(levels)
    if [L["concurrency"] for L in lv] != conc:
        bad(f"levels {[L['concurrency'] for L in lv]}, want {conc}")
    for L in lv:
        if L["requests"] != n or L["ok"] != n or L["errors"] or \
                L["warmup_errors"]:
            bad(f"level {L['concurrency']}: {L}")
    logged = lines(log)
    for c in conc:
        mine = [r for r in logged if r["concurrency"] == c]
        warm = [r for r in mine if r["warmup"]]
        if len(warm) != w or len(mine) != n + w:
            bad(f"level {c}: {len(mine)} requests logged, {len(warm)} "
                f"of them warm-ups; want {n} + {w}")
        if not all(r["ok"] for r in mine):
            bad(f"level {c}: a request failed: {mine}")
    print(f"levels {conc}, {n} requests and {w} warm-up(s) each")


def cmd_faults(levels, *expect):
    L = lines(levels)[0]
    want = {}
    for e in expect:
        k, v = e.split("=")
        want[k] = int(v)
    if L["errors_by_kind"] != want:
        bad(f"errors_by_kind {L['errors_by_kind']}, want {want}")
    print(f"errors_by_kind {want}")


def cmd_ab(levels, *expect):
    rows = lines(levels)
    modes = [(r["mode"], r["concurrency"]) for r in rows]
    want = []
    for e in expect:
        mode, _, c = e.rpartition("=")
        want.append((mode, int(c)))
    if modes != want or any(r["errors"] for r in rows):
        bad(f"levels {modes}, want {want}; {rows}")


def cmd_drained(log, min_ok):
    reqs = [r for r in lines(log) if not r["warmup"]]
    ok = refused = unavailable = 0
    for r in reqs:
        if r["responded"] and r["status"] == 200:
            if not r["ok"]:
                bad(f"stream {r['id']} started (200) but ended as "
                    f"'{r['error']}': {r['detail']}")
            ok += 1
        elif r["responded"] and r["status"] == 503:
            unavailable += 1
        elif not r["responded"] and r["error"] == "connect":
            refused += 1
        else:
            bad(f"request {r['id']}: unexpected outcome {r}")
    if ok < int(min_ok):
        bad(f"only {ok} streams completed, want at least {min_ok}")
    print(f"{ok} streams intact, {refused} refused, {unavailable} got 503")


def cmd_cut(log):
    reqs = [r for r in lines(log) if not r["warmup"]]
    if len(reqs) != 1:
        bad(f"{len(reqs)} requests logged, want 1")
    r = reqs[0]
    if r["ok"]:
        bad("the stream claims success although the deadline cut it")
    if not r["responded"] or r["status"] != 200:
        bad(f"the stream never started: {r}")
    if r["error"] != "error_event":
        bad(f"the cut stream ended as '{r['error']}' ({r['detail']}), "
            f"not with a speech.audio.error event")
    print(f"cut after {r['audio_s']:.2f} s of audio: {r['detail']}")


def cmd_wav(path, text):
    data = open(path, "rb").read()
    if len(data) < 44:
        bad(f"{len(data)} bytes: too short for a WAV header")
    riff, size, wave = struct.unpack_from("<4sI4s", data, 0)
    if riff != b"RIFF" or wave != b"WAVE":
        bad(f"starts {data[:12]!r}, not RIFF....WAVE")
    if size != len(data) - 8:
        bad(f"RIFF size {size}, file has {len(data)} bytes (want size+8)")
    pos, fmt, pcm = 12, None, None
    while pos + 8 <= len(data):
        cid, clen = struct.unpack_from("<4sI", data, pos)
        body = data[pos + 8:pos + 8 + clen]
        if len(body) != clen:
            bad(f"chunk {cid!r} claims {clen} bytes, {len(body)} present")
        if cid == b"fmt ":
            fmt = struct.unpack_from("<HHIIHH", body, 0)
        elif cid == b"data":
            pcm = body
        pos += 8 + clen + (clen & 1)
    if fmt is None or pcm is None:
        bad("no fmt or no data chunk")
    tag, ch, rate, brate, align, bits = fmt
    if (tag, ch, rate, bits) != (1, 1, RATE, 16) or \
            brate != RATE * 2 or align != 2:
        bad(f"fmt {fmt}: want PCM, 1 channel, {RATE} Hz, 16 bits")
    if len(pcm) % 2:
        bad(f"data chunk of {len(pcm)} bytes: odd")
    plausible(len(pcm) / 2 / RATE, text, "wav")
    print(f"RIFF/WAVE PCM 1 ch {rate} Hz 16 bit, {len(pcm) / 2 / RATE:.2f} s")


def cmd_pcm(path, text):
    data = open(path, "rb").read()
    if len(data) % 2:
        bad(f"{len(data)} bytes: odd")
    plausible(len(data) / 2 / RATE, text, "pcm")
    if not any(data):
        bad("all samples are zero")
    print(f"{len(data)} bytes, {len(data) / 2 / RATE:.2f} s")


def cmd_sse(path, text):
    print(check_sse(open(path, "rb").read(), text))


def check_sse(raw, text):
    """A whole SSE body: deltas, then done.  Returns the PCM bytes."""
    raw = raw.decode()
    events = [e for e in re.split(r"\r\n\r\n|\n\n|\r\r", raw) if e.strip()]
    total, done = 0, False
    for e in events:
        fields = {}
        for line in re.split(r"\r\n|\n|\r", e):
            if line.startswith(":"):
                continue
            k, _, v = line.partition(":")
            fields.setdefault(k, []).append(v[1:] if v.startswith(" ") else v)
        name = fields.get("event", ["message"])[0]
        data = json.loads("\n".join(fields.get("data", [])))
        if done:
            bad(f"event {name} after done")
        if data.get("type") != name:
            bad(f"event {name} has type {data.get('type')}")
        if name == "speech.audio.delta":
            pcm = base64.b64decode(data["audio"], validate=True)
            if len(pcm) % 2:
                bad("a delta with an odd byte count")
            total += len(pcm)
        elif name == "speech.audio.done":
            done = True
            usage = data.get("usage")
            if not isinstance(usage, dict):
                bad(f"done without a usage object: {data}")
            if usage.get("output_samples") != total // 2:
                bad(f"usage {usage}, but {total // 2} samples decoded")
        else:
            bad(f"event {name}: {data}")
    if not done:
        bad("no speech.audio.done")
    plausible(total / 2 / RATE, text, "sse")
    return total


def cmd_page(path, text):
    dom = open(path, errors="replace").read()
    m = re.search(r"<body([^>]*)>", dom)
    if not m:
        bad(f"no <body> in the dump: {dom[:300]!r}")
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(1)))
    state, samples = attrs.get("state"), int(attrs.get("samples", "0"))
    scheduled = int(attrs.get("scheduled", "0"))
    if state != "done" or "error" in attrs:
        bad(f"page state {state!r}, error {attrs.get('error')!r}, "
            f"{samples} samples")
    if samples <= 0:
        bad("the page decoded no samples")
    plausible(samples / RATE, text, "page")
    if attrs.get("audio", "none") == "none" or scheduled != samples:
        bad(f"Web Audio: context {attrs.get('audio')!r}, {scheduled} of "
            f"{samples} samples scheduled")
    wave, charts = int(attrs.get("wave", "0")), int(attrs.get("charts", "0"))
    if wave < 10 or charts < 6 or not attrs.get("worker", "").isdigit():
        bad(f"drawn: {wave} waveform columns, {charts} charts, worker "
            f"{attrs.get('worker')!r}")
    print(f"page: {attrs.get('deltas')} deltas, {samples} samples "
          f"({samples / RATE:.2f} s) decoded and scheduled on a "
          f"{attrs['audio']} Hz AudioContext; {wave} waveform columns, "
          f"{charts} charts, worker {attrs['worker']}")


def cmd_page_killed(path):
    dom = open(path, errors="replace").read()
    m = re.search(r"<body([^>]*)>", dom)
    if not m:
        bad(f"no <body> in the dump: {dom[:300]!r}")
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(1)))
    killed, error = attrs.get("killed", ""), attrs.get("error", "")
    if attrs.get("state") != "error" or not killed.isdigit():
        bad(f"page state {attrs.get('state')!r}, killed {killed!r}, "
            f"error {error!r}")
    if f"pid {killed}) died" not in error:
        bad(f"the error does not name the killed worker {killed}: {error!r}")
    print(f"page: killed worker pid {killed} after "
          f"{int(attrs.get('samples', '0')) / RATE:.2f} s of audio; "
          f"error: {error}")


def png_pixels(path):
    """The RGB pixels of an 8-bit RGB or RGBA PNG, row by row."""
    import zlib
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        bad(f"{path} is not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                bad(f"PNG depth {depth} colour type {ctype}")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, None, []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(
            raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        prev = prev or bytearray(stride)
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pr) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def cmd_screenshot(path):
    w, h, bpp, rows = png_pixels(path)
    want = {"waveform green": (44, 160, 44), "chart blue": (31, 119, 180)}
    found = dict.fromkeys(want, 0)
    for row in rows:
        for x in range(0, w * bpp, bpp):
            px = tuple(row[x:x + 3])
            for name, rgb in want.items():
                if all(abs(p - q) <= 12 for p, q in zip(px, rgb)):
                    found[name] += 1
    print(f"{w}x{h} screenshot: " +
          ", ".join(f"{n} pixels of {k}" for k, n in found.items()))
    for name, n in found.items():
        if n < 200:
            bad(f"too little {name} on the screenshot")


class Conn:
    """Just enough of an HTTP/1.1 client to read responses in order."""

    def __init__(self, hostport):
        host, port = hostport.rsplit(":", 1)
        self.s = socket.create_connection((host.strip("[]"), int(port)),
                                          timeout=15)
        self.buf = b""

    def fill(self):
        data = self.s.recv(65536)
        if not data:
            bad("the server closed the connection")
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode("latin-1")

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def head(self):
        """The status line and the headers (names in lower case)."""
        status = self.line()
        headers = {}
        while True:
            line = self.line()
            if not line:
                break
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers

    def response(self):
        status, headers = self.head()
        status = status.split(" ", 2)
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                n = int(self.line().split(";")[0], 16)
                body += self.take(n)
                self.take(2)
                if n == 0:
                    break
        else:
            body = self.take(int(headers.get("content-length", "0")))
        return int(status[1]), headers, body


def post(hostport, obj, version=b"1.1"):
    """One POST /v1/audio/speech on a fresh connection: the response."""
    c = Conn(hostport)
    body = json.dumps(obj).encode()
    c.s.sendall(b"POST /v1/audio/speech HTTP/%s\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (version, len(body), body))
    return c, c.response()


def cmd_rawstream(hostport, text):
    c = Conn(hostport)
    body = json.dumps({"input": text, "stream": True,
                       "stream_format": "audio"}).encode()
    c.s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    t0 = time.monotonic()
    status, headers = c.head()
    if not status.startswith("HTTP/1.1 200") or \
            headers.get("transfer-encoding") != "chunked" or \
            not headers.get("content-type", "").startswith("audio/pcm"):
        bad(f"{status} {headers}")
    arrivals, total = [], 0
    while True:
        n = int(c.line().split(";")[0], 16)
        if n == 0:
            break
        c.take(n + 2)
        arrivals.append(time.monotonic() - t0)
        total += n
        if n % 2:
            bad(f"an HTTP chunk of {n} bytes: not whole samples")
    c.take(2)
    seconds = total / 2 / RATE
    plausible(seconds, text, "raw stream")
    # Each audio chunk is one HTTP chunk, sent as the worker releases it:
    # at the audio's own rate, so the last one comes about the audio's
    # duration after the first.
    if len(arrivals) < 5:
        bad(f"{len(arrivals)} HTTP chunks for {seconds:.2f} s of audio")
    spread = arrivals[-1] - arrivals[0]
    if arrivals[0] > 0.5 or spread < 0.6 * seconds:
        bad(f"first chunk after {arrivals[0]:.3f} s, last {spread:.3f} s "
            f"later, for {seconds:.2f} s of audio: not streamed")
    print(f"{len(arrivals)} chunks, first after {arrivals[0] * 1e3:.1f} ms, "
          f"spread over {spread:.2f} s for {seconds:.2f} s of audio")


def cmd_voices(hostport):
    _, (status, _, body) = post(hostport, {"input": "hi", "voice": "?"})
    msg = json.loads(body)["error"]["message"]
    m = re.search(r"Supported voices: (.*)\.$", msg)
    if status != 400 or not m:
        bad(f"unknown voice: {status} {msg!r}")
    voices = m.group(1).split(", ")
    c = Conn(hostport)
    c.s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    page = c.response()[2].decode()
    offered = re.findall(r"<option>([a-z]+)</option>", page)
    if sorted(offered) != sorted(voices):
        bad(f"the page offers {offered}, the server has {voices}")
    text = "The quick brown fox jumps over the lazy dog."
    digests = {}
    for v in voices:
        _, (status, _, pcm) = post(hostport, {"input": text, "voice": v,
                                              "response_format": "pcm"})
        if status != 200:
            bad(f"voice {v}: HTTP {status}: {pcm[:200]!r}")
        plausible(len(pcm) / 2 / RATE, text, f"voice {v}")
        digests.setdefault(hashlib.sha256(pcm).hexdigest(), []).append(v)
    same = [vs for vs in digests.values() if len(vs) > 1]
    if same:
        bad(f"voices that sound the same (identical PCM): {same}")
    length = {}
    for speed in (0.5, 1.0, 2.0):
        _, (status, _, pcm) = post(hostport, {"input": text, "speed": speed,
                                              "response_format": "pcm"})
        if status != 200:
            bad(f"speed {speed}: HTTP {status}")
        length[speed] = len(pcm) / 2 / RATE
    if not length[2.0] < 0.75 * length[1.0] < 0.75 * 0.75 * length[0.5]:
        bad(f"audio seconds by speed: {length}")
    print(f"{len(voices)} voices, all distinct; seconds by speed: " +
          ", ".join(f"{k}: {v:.2f}" for k, v in length.items()))


# Malformed requests, the status each must get, and what it tests.
GARBAGE = [
    (b"GARBAGE\r\n\r\n", 400, "no method"),
    (b"\x00\x01\x02\xff\xfe\r\n\r\n", 400, "binary"),
    (b"GET / HTTP/1.1\r\nNo colon here\r\n\r\n", 400, "header line"),
    (b"GET / HTTP/9.9\r\n\r\n", 505, "HTTP version"),
    (b"CONNECT x:80 HTTP/1.1\r\n\r\n", 400, "CONNECT target"),
    (b"POST /v1/audio/speech HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400,
     "negative Content-Length"),
    (b"POST /v1/audio/speech HTTP/1.1\r\nContent-Length: 5\r\n"
     b"Content-Length: 6\r\n\r\nhello", 400, "two Content-Lengths"),
    (b"POST /v1/audio/speech HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"fffffffffffffffff\r\n", 400, "chunk size overflow"),
    (b"POST /v1/audio/speech HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
     + b"".join(b"%x\r\n%s\r\n" % (8000, b"a" * 8000) for _ in range(9)),
     413, "chunked body over the limit"),
    (b"POST /v1/audio/speech HTTP/1.1\r\nContent-Length: 100000\r\n"
     b"Expect: 100-continue\r\n\r\n", 413,
     "Expect: 100-continue with a body over the limit"),
]


def cmd_garbage(hostport):
    for raw, want, what in GARBAGE:
        c = Conn(hostport)
        try:
            c.s.sendall(raw)
        except OSError:
            pass  # the answer may come (and the socket close) early
        status, headers, body = c.response()
        if status != want:
            bad(f"{what}: HTTP {status}, want {want}: {body[:200]!r}")
        if not headers.get("content-type", "").startswith(
                "application/json") or \
                not json.loads(body)["error"]["message"]:
            bad(f"{what}: {headers} {body[:200]!r}: no JSON error")
        if headers.get("connection") != "close":
            bad(f"{what}: the connection is kept open: {headers}")
        try:
            rest = c.s.recv(100)
        except ConnectionResetError:
            rest = b""
        if rest:
            bad(f"{what}: more after the answer: {rest!r}")
    print(f"{len(GARBAGE)} malformed requests, each answered and closed")


# What a normal client sends, for the chaos client to cut and mutate.
VALID = [
    b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n"
    b"\r\n" + b'{"input": "hi", "stream": true}'.ljust(40),
    b"POST /v1/audio/speech HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5\r\n{\"inp\r\n9\r\nut\": \"hi\"}\r\n0\r\n\r\n",
    b"POST /v1/audio/speech HTTP/1.1\r\nExpect: 100-continue\r\n"
    b"Content-Length: 15\r\n\r\n{\"input\": \"a\"}",
]


class Chaos:
    """One garbage connection at a time, each of a random kind."""

    def __init__(self, hostport, rng):
        host, port = hostport.rsplit(":", 1)
        self.addr = (host.strip("[]"), int(port))
        self.rng = rng
        self.kinds = {}
        self.idle = []  # silent half-open connections, closed at the end

    def connect(self):
        s = socket.create_connection(self.addr, timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def send_pieces(self, s, data, pieces):
        """Send DATA in PIECES writes, each its own segment."""
        cuts = sorted(self.rng.sample(range(1, len(data)),
                                      min(pieces, len(data)) - 1))
        start = 0
        try:
            for end in cuts + [len(data)]:
                s.sendall(data[start:end])
                start = end
                # Let the server receive each piece on its own.
                time.sleep(0.0005)
        except OSError:
            pass  # the server answered (and closed) before the end

    def answer(self, s):
        """The status of the first response, or None (no answer)."""
        buf = b""
        try:
            while b"\r\n" not in buf and len(buf) < 4096:
                data = s.recv(4096)
                if not data:
                    break
                buf += data
        except OSError:
            pass
        m = re.match(rb"HTTP/1\.1 (\d{3}) ", buf)
        return int(m.group(1)) if m else None

    def expect(self, kind, s, status):
        got = self.answer(s)
        if got != status:
            bad(f"{kind}: HTTP {got}, want {status}")

    def one(self):
        r = self.rng
        kind = r.choice(["truncated", "random", "long-name", "long-url",
                         "long-body", "long-chunked", "mutated",
                         "pipelined-junk", "half-open"])
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        s = self.connect()
        if kind == "truncated":
            req = r.choice(VALID)
            self.send_pieces(s, req[:r.randrange(1, len(req))],
                             r.randint(1, 4))
            if r.random() < 0.5:
                s.shutdown(socket.SHUT_WR)
                self.answer(s)
        elif kind == "random":
            self.send_pieces(s, r.randbytes(r.randint(1, 20000)),
                             r.randint(1, 8))
            self.answer(s)
        elif kind == "long-name":
            name = bytes(r.choice(b"abcxyz-") for _ in
                         range(r.randint(9000, 30000)))
            self.send_pieces(s, b"GET /health HTTP/1.1\r\nX-" + name +
                             b": v\r\n\r\n", r.randint(2, 40))
            self.expect(kind, s, 431)
        elif kind == "long-url":
            path = b"/" + b"a" * r.randint(2100, 7000)
            self.send_pieces(s, b"GET " + path + b" HTTP/1.1\r\n\r\n",
                             r.randint(1, 10))
            self.expect(kind, s, 414)
        elif kind == "long-body":
            n = r.randint(65537, 200000)
            self.send_pieces(s, b"POST /v1/audio/speech HTTP/1.1\r\n"
                             b"Content-Length: %d\r\n\r\n" % n +
                             b"x" * min(n, 4000), r.randint(1, 4))
            self.expect(kind, s, 413)
        elif kind == "long-chunked":
            chunk = b"%x\r\n%s\r\n" % (9000, b"b" * 9000)
            self.send_pieces(s, b"POST /v1/audio/speech HTTP/1.1\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n" +
                             chunk * 8, r.randint(1, 30))
            self.expect(kind, s, 413)
        elif kind == "mutated":
            req = bytearray(r.choice(VALID))
            for _ in range(r.randint(1, 8)):
                req[r.randrange(len(req))] = r.randrange(256)
            self.send_pieces(s, bytes(req), r.randint(1, 4))
            s.shutdown(socket.SHUT_WR)
            self.answer(s)
        elif kind == "pipelined-junk":
            self.send_pieces(s, VALID[0] + r.randbytes(r.randint(1, 3000)),
                             r.randint(1, 4))
            self.answer(s)
        else:  # half-open: a partial request, or nothing, then silence
            if r.random() < 0.5:
                s.sendall(VALID[0][:r.randrange(1, len(VALID[0]))])
            self.idle.append(s)
            return
        s.close()


def cmd_chaos(hostport, seconds, count, seed):
    rng = random.Random(int(seed))
    chaos = Chaos(hostport, rng)
    deadline = time.monotonic() + float(seconds)
    n = 0
    while n < int(count) and time.monotonic() < deadline:
        chaos.one()
        n += 1
        # Hold a few silent connections at a time, as a slow scan would.
        while len(chaos.idle) > 16:
            chaos.idle.pop(0).close()
    for s in chaos.idle:
        s.close()
    print(f"{n} connections (seed {seed}): " +
          ", ".join(f"{k} {v}" for k, v in sorted(chaos.kinds.items())))


def cmd_limits(hostport, idle_s):
    idle_s = float(idle_s)
    a, b = Conn(hostport), Conn(hostport)
    # Both are accepted once one of them is answered.
    for c in (a, b):
        c.s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        if c.response()[0] != 200:
            bad("GET /health on an allowed connection failed")
    c = Conn(hostport)
    status, headers, body = c.response()
    if status != 503 or headers.get("retry-after") != "1" or \
            not json.loads(body)["error"]["message"]:
        bad(f"third connection: {status} {headers} {body!r}")
    t0 = time.monotonic()
    a.s.settimeout(idle_s + 5)
    try:
        gone = a.s.recv(1) == b""
    except ConnectionResetError:
        gone = True
    took = time.monotonic() - t0
    if not gone or took > idle_s + 2.5:
        bad(f"an idle connection still open after {took:.1f} s "
            f"(--idle-timeout {idle_s:g})")
    print(f"third connection: 503; an idle one closed after {took:.1f} s")


def cmd_http10(hostport, text):
    c = Conn(hostport)
    body = json.dumps({"input": text, "stream": True}).encode()
    c.s.sendall(b"POST /v1/audio/speech HTTP/1.0\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    status, headers = c.head()
    if " 200 " not in status or "transfer-encoding" in headers or \
            headers.get("connection") != "close":
        bad(f"{status} {headers}")
    while True:
        data = c.s.recv(65536)
        if not data:
            break
        c.buf += data
    total = check_sse(c.buf, text)
    print(f"HTTP/1.0: {total} PCM bytes in a body ended by the close")


def cmd_keepalive(mode, hostport, text):
    """sequential: GET, a streamed POST, GET, each after the last answer;
    pipelined: two GETs in one write, then the same POST and GET."""
    c = Conn(hostport)
    get = b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n"
    first = [b"/health"] if mode == "sequential" else [b"/metrics",
                                                        b"/health"]
    c.s.sendall(b"".join(get % p for p in first))
    for path in first:
        status, headers, _ = c.response()
        if status != 200 or headers.get("connection", "").lower() == "close":
            bad(f"GET {path.decode()}: {status} {headers}")
    body = json.dumps({"input": text, "stream": True}).encode()
    c.s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    status, headers, sse = c.response()
    ctype = headers.get("content-type", "")
    if status != 200 or not ctype.startswith("text/event-stream"):
        bad(f"the POST after {' + '.join(p.decode() for p in first)} got "
            f"HTTP {status} {ctype!r} ({len(sse)} bytes: "
            f"{sse[:60]!r}...), not its stream: an earlier request "
            f"answered again?")
    if b"event: speech.audio.done" not in sse:
        bad(f"the stream has no done event: {sse[-200:]!r}")
    if headers.get("connection", "").lower() == "close":
        print("note: the server closes the connection after a stream")
        return
    c.s.sendall(get % b"/health")
    status, headers, body = c.response()
    if status != 200 or not headers.get("content-type", "").startswith(
            "application/json"):
        bad(f"GET /health after the stream: {status} {headers}")
    print(f"{mode}: {len(first)} GET(s), a stream and a GET on one "
          f"connection")


def cmd_error_json(path):
    try:
        doc = json.load(open(path))
    except ValueError as e:
        bad(f"body is not JSON ({e}): {open(path, 'rb').read()[:200]!r}")
    err = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(err, dict) or not isinstance(err.get("message"), str) \
            or not err["message"]:
        bad(f"no error.message in {doc}")
    print(err["message"])


def cmd_health(path):
    doc = json.load(open(path))
    if doc.get("status") != "ok":
        bad(f"health: {doc}")
    print(json.dumps(doc))


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? '
                    r'(-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$')


def samples(path):
    out = []
    for line in open(path):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            bad(f"malformed sample line: {line!r}")
        out.append((m.group(1), m.group(2) or "", float(m.group(3))))
    return out


def cmd_metric(path, name, label=""):
    vals = [v for n, lb, v in samples(path) if n == name and label in lb]
    if not vals:
        bad(f"no metric {name}{{{label}}}")
    total = sum(vals)
    print(int(total) if total == int(total) else f"{total:g}")


def cmd_metrics_format(path, *required):
    s = samples(path)
    if not s:
        bad("no samples")
    typed = set(re.findall(r"^# TYPE (\S+) (?:counter|gauge)$",
                           open(path).read(), re.M))
    series = set()
    for name, labels, _ in s:
        if name not in typed:
            bad(f"{name} has no TYPE line")
        if (name, labels) in series:
            bad(f"{name}{labels} twice")
        series.add((name, labels))
    missing = [n for n in required if n not in typed]
    if missing:
        bad(f"missing: {missing}")
    print(f"{len(s)} samples in {len(typed)} families")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        bad(__doc__)
    globals()["cmd_" + sys.argv[1]](*sys.argv[2:])
