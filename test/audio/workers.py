#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks of audio-server --isolation process for test/audio/run.sh.

Each subcommand exits 0 when the check holds, and otherwise prints why and
exits 1.  Every request has a deadline: a stream that hangs fails the check
instead of stalling the run.  Standard library only.

  identical HOSTPORT_A HOSTPORT_B N TEXT
        N concurrent SSE streams of TEXT against each server (fresh ones,
        one worker each): every stream completes, and the two sets of N
        audio streams are identical.  espeak-ng carries state from one
        synthesis to the next within a process (the same sentence twice
        differs by a few samples), so the k-th synthesis of a sentence is
        the same in both only when both engines saw the same history: one
        sentence, one worker, compared as sets.
  kill-one HOSTPORT N TEXT
        2N concurrent SSE streams (a real-time server with 2 workers: N
        each); kill -9 worker 0 while they run.  Exactly its N streams
        end with speech.audio.error; the others complete; a replacement
        with another pid serves the next stream; /metrics counts the
        death, the restart and the N streams.  Prints the time from the
        kill to each error event.
  chaos HOSTPORT KILLS CLIENTS
        CLIENTS clients stream (SSE, raw audio, whole wav) while KILLS
        random workers are killed (kill -9), each once it has run a
        while.  Every response is complete, or ends with the error its
        format allows (SSE error event, a raw body cut short, a 500 or
        503), none hangs; then every worker is up again.
  server-kill HOSTPORT SERVER_PID
        with a stream running, kill -9 the server: every worker exits on
        its own.  Prints how long they took.
  crash HOSTPORT N
        a server with --fault crash: N streams one after another, each
        once every worker is up; each ends with speech.audio.error, and
        /metrics counts N deaths at least.
  backoff HOSTPORT STARTED_MS
        a server with --fault engine (workers exit at start): deaths are
        counted, /health still answers, and the restarts are spaced by a
        growing back-off: no more than a doubling delay from 50 ms
        allows since STARTED_MS (the epoch time of the server's start).
  children PID N
        the process has exactly N children, none a zombie.
  pids HOSTPORT   the worker pids on /health, one line
"""
import base64
import hashlib
import http.client
import json
import os
import random
import signal
import sys
import threading
import time

DEADLINE_S = 60  # any one request
ERROR_WITHIN_S = 1.0  # a dead worker's stream sees its error event


def bad(msg):
    print("FAIL:", msg)
    sys.exit(1)


def conn(hostport, timeout=DEADLINE_S):
    host, port = hostport.rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=timeout)


def get_json(hostport, path):
    c = conn(hostport, 10)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        bad(f"GET {path}: {r.status}")
    return json.loads(body)


def metric(hostport, name):
    c = conn(hostport, 10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    total = None
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total = (total or 0) + float(line.rsplit(" ", 1)[1])
    if total is None:
        bad(f"/metrics has no {name}")
    return total


def wait_until(what, fn, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    bad(f"{what}: not after {seconds} s")


def workers_up(hostport, n):
    h = get_json(hostport, "/health")
    return h if h["workers_up"] == n and all(h["worker_pids"]) else None


class Stream:
    """One speech request, read to its end in a thread of its own."""

    def __init__(self, hostport, text, fmt="sse", on_headers=None):
        self.hostport, self.text, self.fmt = hostport, text, fmt
        self.on_headers = on_headers
        self.status = None
        self.worker = self.pid = None
        self.pcm = bytearray()
        self.outcome = None  # "done", "error", "cut", "refused", "hung"
        self.error_at = None
        self.began = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def body(self):
        req = {"input": self.text, "voice": "alloy"}
        if self.fmt == "sse":
            req.update(stream=True, stream_format="sse")
        elif self.fmt == "audio":
            req.update(stream=True, stream_format="audio")
        else:
            req.update(response_format="wav")
        return json.dumps(req)

    def run(self):
        c = conn(self.hostport)
        try:
            c.request("POST", "/v1/audio/speech", body=self.body(),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            self.status = r.status
            self.worker = r.getheader("X-Worker")
            self.pid = r.getheader("X-Worker-Pid")
            self.began.set()
            if r.status != 200:
                r.read()
                self.outcome = "refused" if r.status == 503 else "error"
                return
            if self.fmt == "sse":
                self.read_sse(r)
            elif self.fmt == "audio":
                try:
                    self.pcm += r.read()
                    self.outcome = "done"
                except http.client.IncompleteRead as e:
                    self.pcm += e.partial
                    self.outcome = "cut"
            else:
                self.pcm += r.read()
                self.outcome = "done"
        except TimeoutError:
            self.outcome = "hung"
        except (ConnectionError, http.client.HTTPException) as e:
            self.outcome = f"broken: {e!r}"
        finally:
            self.began.set()
            c.close()

    def read_sse(self, r):
        data = []
        while True:
            line = r.readline()
            if not line:
                self.outcome = self.outcome or "cut"
                return
            line = line.rstrip(b"\r\n")
            if line.startswith(b"data:"):
                data.append(line[5:].strip())
                continue
            if line or not data:
                continue
            ev = json.loads(b"".join(data))
            data = []
            if ev["type"] == "speech.audio.delta":
                self.pcm += base64.b64decode(ev["audio"])
            elif ev["type"] == "speech.audio.done":
                self.outcome = "done"
            elif ev["type"] == "speech.audio.error":
                self.error_at = time.monotonic()
                self.outcome = "error"

    def start(self):
        self.thread.start()
        return self

    def join(self):
        self.thread.join(DEADLINE_S + 5)
        if self.thread.is_alive():
            self.outcome = "hung"


def cmd_identical(a, b, n, text):
    n = int(n)
    sums = {}
    for hp in (a, b):
        streams = [Stream(hp, text).start() for _ in range(n)]
        for s in streams:
            s.join()
        outcomes = [s.outcome for s in streams]
        if outcomes != ["done"] * n:
            bad(f"{hp}: outcomes {outcomes}")
        sums[hp] = sorted(hashlib.sha256(s.pcm).hexdigest() for s in streams)
        print(f"{hp}: {n} streams, {sum(len(s.pcm) for s in streams)} "
              f"PCM bytes, {len(set(sums[hp]))} distinct")
    if sums[a] != sums[b]:
        bad("the audio differs between the two servers")
    print("identical")


def cmd_kill_one(hp, n, text):
    n = int(n)
    h = wait_until("2 workers up", lambda: workers_up(hp, 2), 10)
    deaths0 = metric(hp, "tts_worker_deaths_total")
    restarts0 = metric(hp, "tts_worker_restarts_total")
    lost0 = metric(hp, "tts_worker_lost_streams_total")
    streams = []
    for _ in range(2 * n):
        streams.append(Stream(hp, text).start())
        streams[-1].began.wait(DEADLINE_S)
    on0 = [s for s in streams if s.worker == "0"]
    on1 = [s for s in streams if s.worker == "1"]
    if len(on0) != n or len(on1) != n:
        bad(f"streams per worker: {len(on0)} and {len(on1)}, want {n}")
    victim = int(on0[0].pid)
    if victim != h["worker_pids"][0]:
        bad(f"X-Worker-Pid {victim}, /health says {h['worker_pids']}")
    # Worker 0 is playing its first stream; the rest wait in its ring.
    wait_until("audio on worker 0", lambda: len(on0[0].pcm) > 0, 10)
    t_kill = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    for s in streams:
        s.join()
    o0 = [s.outcome for s in on0]
    o1 = [s.outcome for s in on1]
    if o0 != ["error"] * n:
        bad(f"worker 0's streams: {o0}")
    if o1 != ["done"] * n:
        bad(f"worker 1's streams: {o1}")
    after = sorted((s.error_at - t_kill) * 1000 for s in on0)
    print(f"kill to error event: median {after[len(after) // 2]:.1f} ms, "
          f"max {after[-1]:.1f} ms over {n} streams")
    if after[-1] > ERROR_WITHIN_S * 1000:
        bad(f"an error event came {after[-1]:.0f} ms after the kill")
    h = wait_until("a replacement", lambda: workers_up(hp, 2), 10)
    if h["worker_pids"][0] == victim:
        bad("worker 0 has the dead pid still")
    s = Stream(hp, "Hello there.").start()
    s.join()
    if s.outcome != "done" or s.worker != "0" or \
            int(s.pid) != h["worker_pids"][0]:
        bad(f"the next stream: {s.outcome} on worker {s.worker} pid "
            f"{s.pid}, want done on 0 pid {h['worker_pids'][0]}")
    got = (metric(hp, "tts_worker_deaths_total") - deaths0,
           metric(hp, "tts_worker_restarts_total") - restarts0,
           metric(hp, "tts_worker_lost_streams_total") - lost0)
    if got != (1, 1, n):
        bad(f"deaths, restarts, lost streams: {got}, want (1, 1, {n})")
    print(f"replacement pid {h['worker_pids'][0]} served the next stream")


def cmd_chaos(hp, kills, clients):
    kills, clients = int(kills), int(clients)
    texts = ["Hello there.", "The quick brown fox jumps over the lazy dog.",
             "A ring buffer lets one thread hand audio to another. " * 4]
    fmts = ["sse", "audio", "wav"]
    n = len(get_json(hp, "/health")["worker_pids"])
    stop = threading.Event()
    done = []
    lock = threading.Lock()
    seed = int(os.environ.get("AUDIO_CHAOS_SEED", "0")) or \
        random.randrange(1, 1 << 30)
    print(f"seed {seed} (AUDIO_CHAOS_SEED={seed} repeats the choices)")
    rng = random.Random(seed)

    def client():
        while not stop.is_set():
            s = Stream(hp, rng.choice(texts), rng.choice(fmts))
            s.run()
            with lock:
                done.append(s)

    threads = [threading.Thread(target=client, daemon=True)
               for _ in range(clients)]
    for t in threads:
        t.start()
    killed = 0
    while killed < kills:
        h = wait_until("every worker up", lambda: workers_up(hp, n), 30)
        time.sleep(rng.uniform(0.3, 0.6))  # a worker that ran a while
        pid = rng.choice(h["worker_pids"])
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            pass
    stop.set()
    for t in threads:
        t.join(DEADLINE_S + 5)
        if t.is_alive():
            bad("a client hung")
    wait_until("every worker up after", lambda: workers_up(hp, n), 30)
    by = {}
    for s in done:
        by[s.outcome] = by.get(s.outcome, 0) + 1
    print(f"{killed} kills, {len(done)} requests: {by}")
    allowed = {"done", "error", "cut", "refused"}
    if set(by) - allowed:
        bad(f"outcomes other than {allowed}: {by}")
    if by.get("done", 0) < len(done) // 2:
        bad("fewer than half the requests completed")
    deaths = metric(hp, "tts_worker_deaths_total")
    if deaths < kills:
        bad(f"tts_worker_deaths_total {deaths} after {kills} kills")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def cmd_server_kill(hp, server_pid):
    pids = wait_until("workers up", lambda: workers_up(hp, 2), 10)[
        "worker_pids"]
    s = Stream(hp, "A ring buffer hands audio from one thread to another. "
               * 6).start()
    wait_until("audio", lambda: len(s.pcm) > 0, 10)
    t0 = time.monotonic()
    os.kill(int(server_pid), signal.SIGKILL)
    left = set(pids)
    while left and time.monotonic() - t0 < 10:
        left = {p for p in left if alive(p)}
        time.sleep(0.01)
    if left:
        for p in left:
            os.kill(p, signal.SIGKILL)
        bad(f"workers {sorted(left)} still running 10 s after the server "
            f"died")
    print(f"every worker exited {(time.monotonic() - t0) * 1000:.0f} ms "
          f"after the server's kill -9")
    s.join()


def cmd_crash(hp, n):
    n = int(n)
    workers = len(get_json(hp, "/health")["worker_pids"])
    for i in range(n):
        wait_until("every worker up", lambda: workers_up(hp, workers), 30)
        s = Stream(hp, "Hello there, this stream is about to crash.").start()
        s.join()
        if s.outcome != "error":
            bad(f"stream {i}: {s.outcome}, want the error event")
    deaths = metric(hp, "tts_worker_deaths_total")
    print(f"{n} streams ended with the error event; {deaths:.0f} deaths")
    if deaths < n:
        bad(f"tts_worker_deaths_total {deaths}, want {n} at least")


def cmd_backoff(hp, started_ms):
    h = get_json(hp, "/health")
    workers = len(h["worker_pids"])
    wait_until("8 deaths", lambda: metric(hp, "tts_worker_deaths_total")
               >= 8, 30)
    restarts = metric(hp, "tts_worker_restarts_total")
    elapsed_ms = time.time() * 1000 - int(started_ms)
    # Delays of 50, 100, 200 ... ms: k restarts take 50 (2^k - 1) ms.
    k, total = 0, 0
    while total <= elapsed_ms:
        total += 50 * 2 ** k
        k += 1
    print(f"{restarts:.0f} restarts in {elapsed_ms:.0f} ms by {workers} "
          f"workers; a back-off allows {k} each")
    if restarts > workers * k:
        bad("restarted faster than the back-off allows")
    if h["status"] != "ok":
        bad(f"/health: {h}")


def children(pid):
    kids, zombies = 0, 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if fields[1] == str(pid):
            kids += 1
            zombies += fields[0] == "Z"
    return kids, zombies


def cmd_children(pid, n):
    kids, zombies = children(pid)
    print(f"{kids} children, {zombies} zombies")
    if kids != int(n) or zombies:
        bad(f"want {n} children and no zombie")


def cmd_pids(hp):
    print(" ".join(str(p) for p in get_json(hp, "/health")["worker_pids"]))


def main():
    cmds = {"identical": cmd_identical, "kill-one": cmd_kill_one,
            "chaos": cmd_chaos, "server-kill": cmd_server_kill,
            "crash": cmd_crash, "backoff": cmd_backoff,
            "children": cmd_children, "pids": cmd_pids}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__)
        sys.exit(2)
    cmds[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    main()
