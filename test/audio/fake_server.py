#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A stand-in for the audio server that breaks its streams on purpose.

test/audio/run.sh points audio-loadgen at it to check that the load
generator counts every kind of invalid stream and accepts valid streams
however they are cut into TCP segments and chunks.  Request k (in arrival
order) gets fault FAULTS[k % len(FAULTS)]; the valid streams vary their
line endings (LF, CRLF, CR), add comments and split events across chunks.

Usage: fake_server.py --port 0 [--faults ok,bad_base64,...] [--wakeup M]
Prints "listening on 127.0.0.1:PORT" first, like the real server.
"""
import argparse
import base64
import http.server
import json
import random
import socketserver
import sys
import threading

FAULTS = ["ok", "bad_base64", "odd_bytes", "no_done", "error_event",
          "bad_json", "status_500", "wrong_type", "no_audio", "reset",
          "truncated_chunk", "stall"]

lock = threading.Lock()
counter = [0]


def event(name, obj, eol="\n"):
    data = obj if isinstance(obj, str) else json.dumps(obj)
    return f"event: {name}{eol}data: {data}{eol}{eol}".encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        with lock:
            k = counter[0]
            counter[0] += 1
        fault = self.server.faults[k % len(self.server.faults)]
        if fault == "reset":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if fault == "status_500":
            msg = json.dumps({"error": {"message": "boom"}}).encode()
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(msg)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(msg)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        rnd = random.Random(k)
        eol = ["\n", "\r\n", "\r"][k % 3]
        # 0.5 s of audio per word, in deltas of 4800 bytes.
        pcm = bytes(rnd.randrange(256) for _ in range(
            24000 * len(body["input"].split())))
        out = b": a comment line" + eol.encode()
        deltas = [pcm[i:i + 4800] for i in range(0, len(pcm), 4800)]
        if fault == "no_audio":
            deltas = []
        for i, d in enumerate(deltas):
            b64 = base64.b64encode(d).decode()
            if fault == "bad_base64" and i == 1:
                b64 = "!!" + b64[2:]
            if fault == "odd_bytes" and i == 1:
                b64 = base64.b64encode(d[:-1]).decode()
            obj = {"type": "speech.audio.delta", "audio": b64}
            if fault == "wrong_type" and i == 1:
                obj["type"] = "speech.audio.done"
            data = json.dumps(obj)
            if fault == "bad_json" and i == 1:
                data = data[:-1]
            out += event("speech.audio.delta", data, eol)
            if fault == "error_event" and i == 1:
                out += event("speech.audio.error",
                             {"type": "speech.audio.error",
                              "error": {"message": "engine died"}}, eol)
                break
        if fault not in ("no_done", "error_event", "stall"):
            out += event("speech.audio.done",
                         {"type": "speech.audio.done",
                          "usage": {"input_tokens": 1}}, eol)
        # Cut the body at random places, so events and lines straddle
        # chunks and reads.
        pos = 0
        while pos < len(out):
            n = rnd.randrange(1, 9000)
            self.chunk(out[pos:pos + n])
            self.wfile.flush()
            pos += n
        if fault == "stall":
            # The stream stops mid-way and never ends: the client's
            # --timeout must end the request.
            self.wfile.flush()
            threading.Event().wait(120)
            return
        if fault == "truncated_chunk":
            self.wfile.write(b"10\r\npartial")
        else:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--faults", default="ok")
    ap.add_argument("--wakeup", default="park")
    args, _ = ap.parse_known_args()
    srv = Server(("127.0.0.1", args.port), Handler)
    srv.faults = args.faults.split(",")
    for f in srv.faults:
        if f not in FAULTS:
            sys.exit(f"unknown fault {f}")
    print(f"listening on 127.0.0.1:{srv.server_address[1]}", flush=True)
    import signal
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(
        target=srv.shutdown).start())
    srv.serve_forever()


if __name__ == "__main__":
    main()
