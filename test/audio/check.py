#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks for test/audio/run.sh that are clearer in Python than in sh.

Each subcommand exits 0 when the check holds, and otherwise prints why and
exits 1.  Standard library only.

  load LEVELS LOG N C TEXT...     audio-loadgen --json/--log output: one
                                  level, N requests at concurrency C, no
                                  errors, every stream 200 and plausible
  faults LEVELS KIND=COUNT...     the level's errors_by_kind is exactly this
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
                                  streamed TEXT and decoded its samples
  keepalive MODE HOST:PORT TEXT   one connection: GET (sequential) or two
                                  pipelined GETs, a streamed POST, a GET
  error_json FILE                 {"error": {"message": "...", ...}}
  health FILE                     /health JSON with status "ok"
  metric FILE NAME                prints the sum of a Prometheus metric
  metrics_format FILE             every sample line is well formed
"""
import base64
import json
import re
import struct
import sys

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


def cmd_faults(levels, *expect):
    L = lines(levels)[0]
    want = {}
    for e in expect:
        k, v = e.split("=")
        want[k] = int(v)
    if L["errors_by_kind"] != want:
        bad(f"errors_by_kind {L['errors_by_kind']}, want {want}")
    print(f"errors_by_kind {want}")


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
    raw = open(path, "rb").read().decode()
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
        else:
            bad(f"event {name}: {data}")
    if not done:
        bad("no speech.audio.done")
    plausible(total / 2 / RATE, text, "sse")
    print(total)


def cmd_page(path, text):
    dom = open(path, errors="replace").read()
    m = re.search(r"<body([^>]*)>", dom)
    if not m:
        bad(f"no <body> in the dump: {dom[:300]!r}")
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(1)))
    state, samples = attrs.get("state"), int(attrs.get("samples", "0"))
    if state != "done" or "error" in attrs:
        bad(f"page state {state!r}, error {attrs.get('error')!r}, "
            f"{samples} samples")
    if samples <= 0:
        bad("the page decoded no samples")
    plausible(samples / RATE, text, "page")
    print(f"page: {attrs.get('deltas')} deltas, {samples} samples "
          f"({samples / RATE:.2f} s) decoded")


class Conn:
    """Just enough of an HTTP/1.1 client to read responses in order."""

    def __init__(self, hostport):
        import socket
        host, port = hostport.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=15)
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

    def response(self):
        status = self.line().split(" ", 2)
        headers = {}
        while True:
            line = self.line()
            if not line:
                break
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
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


def cmd_metric(path, name):
    vals = [v for n, _, v in samples(path) if n == name]
    if not vals:
        bad(f"no metric {name}")
    print(f"{sum(vals):g}")


def cmd_metrics_format(path):
    s = samples(path)
    if not s:
        bad("no samples")
    print(f"{len(s)} samples")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        bad(__doc__)
    globals()["cmd_" + sys.argv[1]](*sys.argv[2:])
