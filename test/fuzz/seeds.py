#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the fuzzers' seed corpora: valid requests and every malformed
one the audio integration test sends (test/audio/run.sh's BAD_CASES and
limits, test/audio/check.py's GARBAGE), so that fuzzing starts from each
path the server is known to take.

Usage: test/fuzz/seeds.py OUTDIR   (writes OUTDIR/http_reader/ and
OUTDIR/speech_request/, one file a seed)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "audio"))
from check import GARBAGE  # noqa: E402  the integration test's own list


def post(body, extra=b""):
    return (b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\n" + extra +
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


def chunked(body, size):
    parts = [body[i:i + size] for i in range(0, len(body), size)]
    return (b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" +
            b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) +
            b"0\r\n\r\n")


# Bodies of POST /v1/audio/speech: valid ones, then run.sh's BAD_CASES.
BODIES = [
    {"input": "Hello there."},
    {"model": "tts-1", "input": "The quick brown fox.", "voice": "nova",
     "speed": 1.5, "stream": True, "stream_format": "sse"},
    {"input": "caf\u00e9 \u65e5\u672c \U0001f600", "stream": True,
     "stream_format": "audio", "response_format": "pcm"},
    {"input": "hi", "response_format": "wav"},
    {"input": "hi", "voice": "shimmer", "speed": 0.25},
]
BAD_BODIES = [
    b"", b'{"input": "hi"', b"[1,2]", b'{"input":"hi"} x',
    b'{"voice":"alloy"}', b'{"input":""}', b'{"input":"  "}',
    b'{"input":42}', b'{"input":"hi","voice":"nobody"}',
    b'{"input":"hi","speed":10}', b'{"input":"hi","speed":0.1}',
    b'{"input":"hi","speed":"fast"}', b'{"input":"hi","stream":"yes"}',
    b'{"input":"hi","stream":true,"stream_format":"ws"}',
    b'{"input":"hi","response_format":"mp3"}',
    b'{"input":"hi","stream":true,"response_format":"wav"}',
    b'{"input":"caf\xe9 \xff"}',
    json.dumps({"input": "a" * 5000}).encode(),
    json.dumps({"input": "hi", "voice": "a" + "\u00e9" * 40},
               ensure_ascii=False).encode(),
    b'{"input":"a\\u0000b"}',
]


def http_seeds():
    get = b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n"
    seeds = [get % p for p in (b"/", b"/health", b"/metrics", b"/nope",
                               b"/health?x=1#f")]
    seeds += [get % b"/health" + get % b"/metrics",
              b"HEAD / HTTP/1.1\r\n\r\n",
              b"DELETE /health HTTP/1.1\r\n\r\n",
              b"POST /metrics HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
              b"GET /v1/audio/speech HTTP/1.1\r\n\r\n",
              b"GET /health HTTP/1.0\r\n\r\n",
              b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
              b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"]
    for body in BODIES:
        raw = json.dumps(body).encode()
        seeds += [post(raw), chunked(raw, 7),
                  post(raw, b"Expect: 100-continue\r\n"),
                  post(raw) + get % b"/health"]
    seeds += [post(b) for b in BAD_BODIES]
    seeds += [raw for raw, _, _ in GARBAGE]
    seeds += [get % (b"/" + b"a" * 5000),
              b"GET /health HTTP/1.1\r\nX-Big: " + b"x" * 9000 + b"\r\n\r\n",
              b"GET /health HTTP/1.1\r\nX-" + b"n" * 3000 + b": v\r\n\r\n",
              post(b"a " * 40000, b"Expect:\r\n"),
              b"GET /health HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
              b"GET /health HTTP/1.1\r\n"]
    # A prefix per seed: pipelining on, and three ways to cut the bytes.
    out = []
    for raw in seeds:
        for prefix in (b"\x01\x00\x01", b"\x01\x12\x34", b"\x00\xff\xff"):
            out.append(prefix + raw)
    return out


def speech_seeds():
    return [json.dumps(b).encode() for b in BODIES] + BAD_BODIES


def write(directory, seeds):
    os.makedirs(directory, exist_ok=True)
    for i, data in enumerate(seeds):
        with open(os.path.join(directory, "seed-%03d" % i), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    write(os.path.join(sys.argv[1], "http_reader"), http_seeds())
    write(os.path.join(sys.argv[1], "speech_request"), speech_seeds())
