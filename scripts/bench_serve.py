#!/usr/bin/env python3
"""Benchmark `nmt serve` against `nmt translate` on the same sentences.

Three modes:
  throughput (default)  N keep-alive clients, one sentence a request: server sentences/s,
                        p50/p95/p99 latency, status counts, server RSS before and after, the mean
                        batch size from its /metrics, and the ratio to `nmt translate`'s
                        sentences/s on the same lines (model loading excluded: read from its log).
                        --client python (default): threads pulling the lines from a queue, and a
                        check that the translations are byte-identical to translate's;
                        --client wrk: Debian's wrk for --seconds (a C event loop, so the load
                        generator leaves the cores to the server; the Python client took most
                        of a core on 2). --repeat K runs the load K times and prints the median.
  latency               one client, one sentence at a time: server p50/p95 latency against the
                        median time `nmt translate` takes on single-sentence files (the first
                        min(lines, 20) sentences, loading excluded), and the server's mean against
                        a warm translate (--chunk-lines 1 on the same lines).
  drain                 --clients (default 64 here) clients loop on one-sentence requests; after
                        --drain-after seconds the server gets SIGTERM. Counts complete 200s,
                        other statuses, requests not accepted (refused/reset/closed before any
                        response) and answers cut off or unparsable (must be 0), the server's exit
                        code and the time from SIGTERM to exit. Exits non-zero on any cut-off or
                        unparsable answer or a non-zero server exit.

  python3 scripts/bench_serve.py --checkpoint DIR --src FILE [--lines 1000] [--clients 32] \\
      [--beam 1] [--threads 0] [--nmt build/nmt] [--mode throughput|latency|drain] \\
      [--client python|wrk] [--seconds 10] [--serve-flags "..."] [--repeat 1] [--work DIR] \\
      [--drain-after 2]
"""
import argparse
import http.client
import json
import math
import os
import queue
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

READY_TIMEOUT_S = 120.0
EXIT_TIMEOUT_S = 120.0
LOG_RE = re.compile(r"translated (\d+) lines in ([0-9.]+) s \(([0-9.]+) sentences/s")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--lines", type=int, default=1000)
    p.add_argument("--clients", type=int, default=None,
                   help="client threads (default 32; 64 in drain mode)")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="0 = the binaries' default (all cores)")
    p.add_argument("--nmt", default="build/nmt")
    p.add_argument("--mode", choices=["throughput", "latency", "drain"], default="throughput")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--work", default=None, help="scratch dir (default: a new temp dir)")
    p.add_argument("--client", choices=["python", "wrk"], default="python",
                   help="throughput load from Python threads, or from wrk (Debian's wrk: a C "
                        "event loop that leaves the cores to the server); wrk runs --seconds")
    p.add_argument("--seconds", type=float, default=10.0, help="wrk: seconds of load per run")
    p.add_argument("--serve-flags", default="",
                   help="more flags for nmt serve only, e.g. \"--max-delay-ms 20\"")
    p.add_argument("--drain-after", type=float, default=2.0,
                   help="drain mode: seconds of load before SIGTERM")
    args = p.parse_args(argv)
    if args.clients is None:
        args.clients = 64 if args.mode == "drain" else 32
    if args.lines < 1 or args.clients < 1 or args.repeat < 1:
        p.error("--lines, --clients and --repeat must be >= 1")
    if not (os.path.isfile(args.nmt) and os.access(args.nmt, os.X_OK)):
        p.error(f"--nmt {args.nmt}: no such executable (build it, or give its path)")
    args.work = args.work or tempfile.mkdtemp(prefix="bench_serve.")
    os.makedirs(args.work, exist_ok=True)
    return args


def read_lines(path, n):
    """The first n non-empty lines of path, without their line ends."""
    out = []
    with open(path, "rb") as f:
        for raw in f:  # binary: lines end at \n only, as the C++ reader splits them
            line = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
            if line.strip():
                out.append(line)
                if len(out) == n:
                    break
    if not out:
        sys.exit(f"bench_serve: no non-empty lines in {path}")
    return out


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of values; nan when empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100.0 * len(s)) - 1))]


def decode_flags(args):
    flags = ["--beam", str(args.beam)]
    if args.threads > 0:
        flags += ["--threads", str(args.threads)]
    return flags


# ---------------------------------------------------------------- nmt translate (baseline)

def run_translate(args, lines, name, extra=()):
    """Runs `nmt translate` on lines; returns (output lines, seconds, sentences/s) from its log."""
    src = os.path.join(args.work, name + ".src")
    out = os.path.join(args.work, name + ".out")
    log = os.path.join(args.work, name + ".log")
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    cmd = [args.nmt, "translate", "--checkpoint", args.checkpoint, "--input", src,
           "--output", out] + decode_flags(args) + list(extra)
    with open(log, "w") as logf:
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=logf).returncode
    text = open(log, encoding="utf-8", errors="replace").read()
    if rc != 0:
        sys.exit(f"bench_serve: `{' '.join(cmd)}` exited {rc}; log tail:\n{text[-3000:]}")
    m = LOG_RE.findall(text)
    if not m:
        sys.exit(f"bench_serve: no 'translated N lines in S s' line in {log}")
    count, secs, sps = int(m[-1][0]), float(m[-1][1]), float(m[-1][2])
    with open(out, "rb") as f:
        outputs = [b.decode("utf-8", errors="surrogateescape") for b in f.read().split(b"\n")]
    if outputs and outputs[-1] == "":
        outputs.pop()
    if count != len(lines) or len(outputs) != len(lines):
        print(f"warning: translate logged {count} lines and wrote {len(outputs)} "
              f"for {len(lines)} inputs")
    return outputs, secs, sps


# ---------------------------------------------------------------- the server process

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `nmt serve` process on a free port, its stderr in WORK/serve.log."""

    def __init__(self, args):
        self.port = free_port()
        self.log_path = os.path.join(args.work, "serve.log")
        cmd = [args.nmt, "serve", "--checkpoint", args.checkpoint, "--port", str(self.port),
               "--host", "127.0.0.1"] + decode_flags(args) + args.serve_flags.split()
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.term_at = None
        self.exit_at = None
        self._waiter = threading.Thread(target=self._wait_exit, daemon=True)
        self._waiter.start()

    def _wait_exit(self):
        self.proc.wait()
        self.exit_at = time.monotonic()

    def log_tail(self, chars=3000):
        self.log.flush()
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()[-chars:]

    def wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"bench_serve: server exited {self.proc.returncode} before ready; "
                         f"log tail:\n{self.log_tail()}")
            if self.get("/ready")[0] == 200:
                return
            time.sleep(0.1)
        sys.exit(f"bench_serve: server not ready after {READY_TIMEOUT_S:.0f} s; "
                 f"log tail:\n{self.log_tail()}")

    def get(self, path):
        """(status, body) of GET path; (None, b'') on a connection error."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read()
        except (OSError, http.client.HTTPException):
            return None, b""
        finally:
            conn.close()

    def rss_mib(self):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return float("nan")

    def terminate(self, timeout=EXIT_TIMEOUT_S):
        """SIGTERM, wait; returns (exit code or None on timeout, seconds from SIGTERM to exit)."""
        if self.proc.poll() is None:
            self.term_at = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)
        self._waiter.join(timeout)
        if self.exit_at is None:
            return None, float("nan")
        return self.proc.returncode, self.exit_at - (self.term_at or self.exit_at)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# ---------------------------------------------------------------- one request

def post_sentence(conn, sentence):
    """POSTs one sentence; returns (status, translation or None, latency s).

    status is an int, or 'conn-error' (refused/reset/closed before any response; the
    exception's name in place of the translation), 'cut-off' (response started but truncated
    or malformed), or 'unparsable'."""
    body = json.dumps({"text": [sentence]}).encode("utf-8")
    start = time.monotonic()
    try:
        conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
    except (OSError, http.client.RemoteDisconnected, http.client.CannotSendRequest) as e:
        conn.close()
        return "conn-error", type(e).__name__, time.monotonic() - start
    except http.client.HTTPException:
        conn.close()
        return "cut-off", None, time.monotonic() - start
    try:
        data = resp.read()
    except (OSError, http.client.HTTPException):
        conn.close()
        return "cut-off", None, time.monotonic() - start
    latency = time.monotonic() - start
    return classify(resp.status, data, latency)


def classify(status, data, latency):
    """(status, translation, latency) for a complete body; 'unparsable' if it is not the JSON
    the interface promises (translations with one string on 200, an error object otherwise)."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "unparsable", None, latency
    if status == 200:
        tr = obj.get("translations") if isinstance(obj, dict) else None
        if not (isinstance(tr, list) and len(tr) == 1 and isinstance(tr[0], str)):
            return "unparsable", None, latency
        return 200, tr[0], latency
    if not (isinstance(obj, dict) and "error" in obj):
        return "unparsable", None, latency
    return status, None, latency


# ---------------------------------------------------------------- throughput mode

def load_worker(port, work, results):
    """One keep-alive client: sentences from work until empty; results[i] = (status, tr, s)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        while True:
            try:
                i, sentence = work.get_nowait()
            except queue.Empty:
                return
            results[i] = post_sentence(conn, sentence)
    finally:
        conn.close()


def run_load(port, lines, clients):
    """All lines through `clients` threads; returns (results by line index, wall seconds)."""
    work = queue.Queue()
    for item in enumerate(lines):
        work.put(item)
    results = [None] * len(lines)
    threads = [threading.Thread(target=load_worker, args=(port, work, results), daemon=True)
               for _ in range(clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    return [r or ("not sent", None, 0.0) for r in results], wall


def status_counts(statuses):
    counts = {}
    for s in statuses:
        counts[str(s)] = counts.get(str(s), 0) + 1
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))


def compare(lines, results, expected, show=3):
    """Prints and returns the number of 200 answers that differ from translate's lines."""
    bad = [i for i, r in enumerate(results)
           if r[0] == 200 and (i >= len(expected) or r[1] != expected[i])]
    missing = sum(1 for r in results if r[0] != 200)
    print(f"  identical to translate: {len(lines) - missing - len(bad)} of {len(lines)}, "
          f"mismatches: {len(bad)}, no 200 answer: {missing}")
    for i in bad[:show]:
        print(f"    line {i + 1}: src    {lines[i]!r}\n"
              f"             server {results[i][1]!r}\n"
              f"             transl {expected[i] if i < len(expected) else None!r}")
    return len(bad)


def report_load(args, run, results, wall, base_sps):
    ok = [r for r in results if r[0] == 200]
    lat = [r[2] * 1000.0 for r in ok]
    sps = len(ok) / wall if wall > 0 else float("nan")
    ratio = sps / base_sps if base_sps > 0 else float("nan")
    print(f"run {run}: throughput: {sps:.1f} sentences/s ({len(ok)} of {len(results)} answered "
          f"200 in {wall:.2f} s, {args.clients} clients, beam {args.beam}), translate: "
          f"{base_sps:.1f} sentences/s, ratio {ratio:.2f}")
    print(f"  latency: p50 {percentile(lat, 50):.1f} ms, p95 {percentile(lat, 95):.1f} ms, "
          f"p99 {percentile(lat, 99):.1f} ms (200 answers)")
    print(f"  statuses: {status_counts(r[0] for r in results)}")
    return sps


def mode_throughput(args, lines):
    expected, secs, base_sps = run_translate(args, lines, "translate")
    print(f"translate: {len(lines)} lines in {secs:.2f} s, {base_sps:.1f} sentences/s "
          f"(beam {args.beam}, threads {args.threads or 'default'}, loading excluded)")
    server = Server(args)
    failed = False
    try:
        server.wait_ready()
        rss0 = server.rss_mib()
        print(f"server RSS before load: {rss0:.1f} MiB")
        runs = []
        for run in range(1, args.repeat + 1):
            if args.client == "wrk":
                runs.append(run_wrk(args, server.port, lines, run, base_sps))
                print(f"  server RSS after run {run}: {server.rss_mib():.1f} MiB "
                      f"(before load {rss0:.1f} MiB)")
                print(f"  batches (server's /metrics, all runs so far): {batch_summary(server)}")
                continue
            results, wall = run_load(server.port, lines, args.clients)
            runs.append(report_load(args, run, results, wall, base_sps))
            failed |= compare(lines, results, expected) > 0
            failed |= any(r[0] != 200 for r in results)
            print(f"  server RSS after run {run}: {server.rss_mib():.1f} MiB "
                  f"(before load {rss0:.1f} MiB)")
            print(f"  batches (server's /metrics, all runs so far): {batch_summary(server)}")
        med = statistics.median(runs)
        ratio = med / base_sps if base_sps > 0 else float("nan")
        print(f"median throughput over {len(runs)} runs: {med:.1f} sentences/s, translate: "
              f"{base_sps:.1f} sentences/s, ratio {ratio:.2f}")
        failed |= report_exit(server)
    finally:
        server.kill()
    return 1 if failed else 0


WRK_SCRIPT = r"""
local bodies = {}
for line in io.lines("%s") do bodies[#bodies + 1] = line end
local n = 0
setup = function(thread) thread:set("first", n); n = n + 97 end
init = function() n = first end
request = function()
  n = n + 1
  return wrk.format("POST", "/translate", {["Content-Type"] = "application/json"},
                    bodies[n %% #bodies + 1])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("wrk-summary %%d %%d %%d %%d %%d %%d %%d\n", summary.requests,
    summary.duration, e.connect, e.read, e.write, e.status, e.timeout))
  for _, p in ipairs({50, 95, 99}) do
    io.write(string.format("wrk-p%%d %%.3f\n", p, latency:percentile(p) / 1000))
  end
end
"""


def run_wrk(args, port, lines, run, base_sps):
    """One wrk run of --seconds with --clients connections, one sentence a request (the lines
    in turn); returns its sentences/s."""
    bodies = os.path.join(args.work, "bodies.jsonl")
    with open(bodies, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps({"text": [line]}, ensure_ascii=False) + "\n")
    script = os.path.join(args.work, "bench.lua")
    with open(script, "w") as f:
        f.write(WRK_SCRIPT % bodies)
    cmd = ["wrk", "-t", "1", "-c", str(args.clients), "-d", f"{args.seconds:.0f}s",
           "--timeout", "60s", "-s", script, f"http://127.0.0.1:{port}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    fields = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("wrk-"):
            fields[parts[0]] = [float(x) for x in parts[1:]]
    requests, micros, connect, read, write, status, timeout = fields["wrk-summary"]
    sps = requests / (micros / 1e6)
    print(f"run {run}: throughput: {sps:.1f} sentences/s ({requests:.0f} requests in "
          f"{micros / 1e6:.1f} s, wrk, {args.clients} connections, beam {args.beam}), translate: "
          f"{base_sps:.1f} sentences/s, ratio {sps / base_sps:.2f}")
    print(f"  latency: p50 {fields['wrk-p50'][0]:.1f} ms, p95 {fields['wrk-p95'][0]:.1f} ms, "
          f"p99 {fields['wrk-p99'][0]:.1f} ms")
    print(f"  errors: connect {connect:.0f}, read {read:.0f}, write {write:.0f}, "
          f"non-2xx {status:.0f}, timeout {timeout:.0f}")
    return sps


def batch_summary(server):
    """The mean sentences per batch from the server's nmt_batch_sentences histogram."""
    status, body = server.get("/metrics")
    if status != 200:
        return "unavailable"
    values = {}
    for line in body.decode("utf-8", "replace").splitlines():
        for name in ("nmt_batch_sentences_sum", "nmt_batch_sentences_count"):
            if line.startswith(name + " "):
                values[name] = float(line.split()[1])
    count = values.get("nmt_batch_sentences_count", 0)
    if not count:
        return "none"
    mean = values["nmt_batch_sentences_sum"] / count
    return f"{count:.0f} batches, {mean:.1f} sentences each on average"


def report_exit(server):
    """SIGTERMs the server and prints its exit; returns True when it was not a clean 0."""
    code, secs = server.terminate()
    if code is None:
        print(f"server exit: did not exit {EXIT_TIMEOUT_S:.0f} s after SIGTERM (killed)")
        return True
    print(f"server exit code: {code}, {secs:.2f} s from SIGTERM to exit")
    if code != 0:
        print(f"server log tail:\n{server.log_tail()}")
    return code != 0


# ---------------------------------------------------------------- latency mode

def baseline_latency(args, lines):
    """Median seconds `nmt translate` reports for single-sentence files (loading excluded)."""
    secs = []
    for i, line in enumerate(lines[:20]):
        _, s, sps = run_translate(args, [line], f"single{i:02d}")
        # The log prints seconds to 0.01 s; 1/sentences-per-s keeps more digits.
        secs.append(1.0 / sps if sps > 0 else s)
    return statistics.median(secs), secs


def mode_latency(args, lines):
    base_med, base = baseline_latency(args, lines)
    print(f"translate (single-sentence files, first {len(base)}): median "
          f"{base_med * 1000:.1f} ms, p95 {percentile(base, 95) * 1000:.1f} ms "
          f"(beam {args.beam}, loading excluded)")
    server = Server(args)
    failed = False
    try:
        server.wait_ready()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
        results = [post_sentence(conn, line) for line in lines]
        conn.close()
        lat = [r[2] * 1000.0 for r in results if r[0] == 200]
        p50 = percentile(lat, 50)
        print(f"server latency: p50 {p50:.1f} ms, p95 {percentile(lat, 95):.1f} ms, "
              f"p99 {percentile(lat, 99):.1f} ms (1 client, {len(lat)} of {len(lines)} "
              f"answered 200, beam {args.beam})")
        print(f"  statuses: {status_counts(r[0] for r in results)}")
        print(f"p50 ratio server/translate: {p50 / (base_med * 1000.0):.2f}")
        # A warm translate, one sentence a batch: its mean against the server's mean.
        _, _, warm_sps = run_translate(args, lines, "warm", ["--chunk-lines", "1"])
        warm_ms, mean = 1000.0 / warm_sps, statistics.mean(lat)
        print(f"translate --chunk-lines 1 on the {len(lines)} lines (warm): mean {warm_ms:.1f} "
              f"ms a sentence; server mean {mean:.1f} ms; ratio {mean / warm_ms:.2f}")
        failed |= len(lat) != len(lines)
        failed |= report_exit(server)
    finally:
        server.kill()
    return 1 if failed else 0


# ---------------------------------------------------------------- drain mode

class DrainState:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.refusals = {}  # not accepted after SIGTERM, by exception name
        self.termed = threading.Event()
        self.term_at = float("inf")

    def sigterm(self, server):
        self.term_at = time.monotonic()
        self.termed.set()
        return server.terminate()

    def add(self, outcome):
        with self.lock:
            self.counts[outcome] = self.counts.get(outcome, 0) + 1


def drain_worker(port, lines, k, state, deadline):
    """Loops one-sentence requests until a connection error after SIGTERM (or deadline)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=EXIT_TIMEOUT_S)
    i = k
    while time.monotonic() < deadline:
        sent = time.monotonic()
        status, kind, _ = post_sentence(conn, lines[i % len(lines)])
        after = state.termed.is_set()
        i += 1
        if status == "conn-error":
            state.add("not accepted" if after else "connection error before SIGTERM")
            if after:
                kind += " (sent before SIGTERM)" if sent < state.term_at else ""
                with state.lock:
                    state.refusals[kind] = state.refusals.get(kind, 0) + 1
                break
            time.sleep(0.01)
            continue
        state.add(status)
    conn.close()


def drain_report(state, code, secs):
    c = dict(state.counts)
    bad = c.pop("cut-off", 0) + c.pop("unparsable", 0)
    ok = c.pop(200, 0)
    refused = c.pop("not accepted", 0)
    early = c.pop("connection error before SIGTERM", 0)
    print(f"drain: 200 complete: {ok}, not accepted (refused/reset/closed before a response): "
          f"{refused}, cut off or unparsable: {bad} (must be 0)")
    kinds = ", ".join(f"{k}: {v}" for k, v in sorted(state.refusals.items()))
    print(f"  not accepted by kind: {kinds or 'none'}")
    print(f"  cut off: {state.counts.get('cut-off', 0)}, unparsable: "
          f"{state.counts.get('unparsable', 0)}, connection errors before SIGTERM: {early}")
    other = ", ".join(f"{k}: {v}" for k, v in sorted(c.items(), key=lambda kv: str(kv[0])))
    print(f"  other statuses: {other or 'none'}")
    if code is None:
        print(f"server exit: did not exit {EXIT_TIMEOUT_S:.0f} s after SIGTERM (killed)")
    else:
        print(f"server exit code: {code}, {secs:.2f} s from SIGTERM to exit")
    return bad > 0 or code != 0


def mode_drain(args, lines):
    server = Server(args)
    state = DrainState()
    try:
        server.wait_ready()
        deadline = time.monotonic() + args.drain_after + EXIT_TIMEOUT_S
        threads = [threading.Thread(target=drain_worker, daemon=True,
                                    args=(server.port, lines, k, state, deadline))
                   for k in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(args.drain_after)
        code, secs = state.sigterm(server)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()) + 5)
        failed = drain_report(state, code, secs)
        if code != 0:
            print(f"server log tail:\n{server.log_tail()}")
    finally:
        server.kill()
    return 1 if failed else 0


def main(argv=None):
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the finally blocks still stop the server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    lines = read_lines(args.src, args.lines)
    print(f"bench_serve: mode {args.mode}, {len(lines)} lines from {args.src}, "
          f"work dir {args.work}")
    mode = {"throughput": mode_throughput, "latency": mode_latency, "drain": mode_drain}
    return mode[args.mode](args, lines)


if __name__ == "__main__":
    sys.exit(main())
