"""Language-server latency over real stdio (the server as a subprocess, JSON-RPC framed by
hand, no test framework in between).

Measures, on a generated 1,000-line document:
  * startup: process spawn -> initialize response;
  * diagnostics: didChange sent -> publishDiagnostics for that version received
    (debounce set to 0, so this is the analysis + transport time);
  * completion: request -> response, at positions of every context kind.

Usage: python benchmarks/bench_lsp.py [--lines 1000] [--rounds 40] [--json]
Targets (docs/performance.md, "Language server"): diagnostics < 50 ms, completion < 20 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_document(lines: int) -> str:
    """A valid document of about ``lines`` lines: many policies using every block."""
    out = ["version 2", "# generated for the language-server benchmark", ""]
    i = 0
    while len(out) < lines - 30:
        parent = f" extends p{i - 1}" if i and i % 3 else ""
        out += [
            f"policy p{i}{parent} {{",
            "  cache {",
            f"    capacity = {8 + i % 16}",
            "    eviction = lfu",
            "    frequency_decay = 0.9",
            "    pin = [0, 1]",
            "  }",
            "  prefetch {",
            "    strategy = history",
            "    budget = 2",
            "    history_window = 40",
            "  }",
            "  schedule {",
            "    mode = cpu_fallback",
            "  }",
            "  monitor {",
            "    metrics = [hit_rate, miss_rate]",
            "    window = 200",
            "  }",
            "  adapt {",
            "    when hit_rate < 0.4 for 100 accesses {",
            "      budget = 3",
            "    }",
            "  }",
            "}",
            "",
        ]
        i += 1
    return "\n".join(out) + "\n"


class Conn:
    def __init__(self, proc):
        self.proc = proc
        self.next_id = 0
        self.waiters: dict = {}
        self.diag_waiters: dict = {}
        self.reader = asyncio.get_running_loop().create_task(self._read())

    def send(self, obj):
        body = json.dumps(obj).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method, params):
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.waiters[self.next_id] = fut
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await asyncio.wait_for(fut, 60)

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _read(self):
        rd = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = await rd.readline()
                if not line:
                    return
                line = line.decode().strip()
                if not line:
                    break
                k, v = line.split(":", 1)
                headers[k.lower()] = v.strip()
            msg = json.loads(await rd.readexactly(int(headers["content-length"])))
            now = time.perf_counter()
            if "id" in msg and "method" not in msg:
                fut = self.waiters.pop(msg["id"], None)
                if fut and not fut.done():
                    fut.set_result((now, msg))
            elif msg.get("method") == "textDocument/publishDiagnostics":
                key = (msg["params"]["uri"], msg["params"].get("version"))
                fut = self.diag_waiters.pop(key, None)
                if fut and not fut.done():
                    fut.set_result((now, msg))
            elif "id" in msg:   # a server->client request: answer null
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})

    def expect_diagnostics(self, uri, version):
        fut = asyncio.get_running_loop().create_future()
        self.diag_waiters[(uri, version)] = fut
        return fut


def proc_cpu_ms(pid: int) -> float | None:
    """User + system CPU time of a process, in ms (Linux /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def run(lines: int, rounds: int) -> dict:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lsp.server", "--stdio", cwd=REPO,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    conn = Conn(proc)
    t_init, _ = await conn.request("initialize", {
        "processId": os.getpid(), "rootUri": None,
        "capabilities": {"textDocument": {"completion": {"completionItem": {"snippetSupport": True}}}},
        "initializationOptions": {"debounceMs": 0}})
    startup_ms = (t_init - t0) * 1000
    startup_cpu = proc_cpu_ms(proc.pid)
    conn.notify("initialized", {})
    text = make_document(lines)
    n_lines = text.count("\n")
    uri = "file:///tmp/bench_lsp_document.moe"
    fut = conn.expect_diagnostics(uri, 1)
    t = time.perf_counter()
    conn.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "moe", "version": 1, "text": text}})
    t_open, first = await asyncio.wait_for(fut, 60)
    open_ms = (t_open - t) * 1000
    assert first["params"]["diagnostics"] == [], first["params"]["diagnostics"][:3]

    # didChange -> publishDiagnostics: alternately break and repair a value in the middle
    lines_ = text.split("\n")
    target = next(i for i in range(len(lines_) // 2, len(lines_)) if lines_[i].strip().startswith("capacity"))
    col = lines_[target].index("capacity")
    diag_ms = []
    version = 1
    cpu0 = proc_cpu_ms(proc.pid)
    for r in range(rounds):
        version += 1
        new = "capcity" if r % 2 == 0 else "capacity"
        old_len = len("capacity") if r % 2 == 0 else len("capcity")
        fut = conn.expect_diagnostics(uri, version)
        t = time.perf_counter()
        conn.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": target, "character": col},
                                          "end": {"line": target, "character": col + old_len}}, "text": new}]})
        t_done, msg = await asyncio.wait_for(fut, 60)
        n = len(msg["params"]["diagnostics"])
        assert (n > 0) == (r % 2 == 0), (r, msg["params"]["diagnostics"])
        diag_ms.append((t_done - t) * 1000)
    cpu1 = proc_cpu_ms(proc.pid)
    diag_cpu = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / rounds
    if rounds % 2 == 1:   # leave the document valid
        version += 1
        fut = conn.expect_diagnostics(uri, version)
        conn.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": [{"text": text}]})
        await fut

    # completion at positions of each kind, spread over the document
    spots = []
    for i, l in enumerate(lines_):
        s = l.strip()
        if s.startswith("eviction = "):
            spots.append((i, len(l)))                # enum values
        elif s.startswith("window = "):
            spots.append((i, l.index("window")))     # parameter names
        elif s.startswith("when hit_rate"):
            spots.append((i, l.index("hit_rate")))   # metrics
    step = max(1, len(spots) // rounds)
    spots = spots[::step][:rounds]
    comp_ms = []
    cpu2 = proc_cpu_ms(proc.pid)
    for line, ch in spots:
        t = time.perf_counter()
        t_done, msg = await conn.request("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": ch}})
        assert msg["result"]["items"], msg
        comp_ms.append((t_done - t) * 1000)
    cpu3 = proc_cpu_ms(proc.pid)
    comp_cpu = None if cpu2 is None or cpu3 is None else (cpu3 - cpu2) / max(1, len(spots))
    # completion typed while the server is analysing: a ranged edit (analysis starts at once,
    # debounce 0), then at once a completion request; its latency shows whether requests
    # wait for the analysis
    busy_ms = []
    for r in range(min(rounds, len(spots))):
        version += 1
        new = "capcity" if r % 2 == 0 else "capacity"
        old_len = len("capacity") if r % 2 == 0 else len("capcity")
        fut = conn.expect_diagnostics(uri, version)
        conn.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": target, "character": col},
                                          "end": {"line": target, "character": col + old_len}}, "text": new}]})
        line, ch = spots[r]
        t = time.perf_counter()
        t_done, msg = await conn.request("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": ch}})
        busy_ms.append((t_done - t) * 1000)
        await asyncio.wait_for(fut, 60)

    # the same document through the front end in this process: the part of the diagnostics
    # latency that is the checker's own work (the rest is the server and the transport)
    from mpl.checker import analyze
    front, front_cpu = [], []
    for _ in range(max(5, rounds // 4)):
        t, c = time.perf_counter(), time.process_time()
        analyze(text, "/tmp/bench_lsp_document.moe")
        front.append((time.perf_counter() - t) * 1000)
        front_cpu.append((time.process_time() - c) * 1000)
    await conn.request("shutdown", None)
    conn.notify("exit", None)
    await asyncio.wait_for(proc.wait(), 30)
    conn.reader.cancel()
    return {
        "lines": n_lines,
        "startup_ms": round(startup_ms, 1),
        "startup_cpu_ms": None if startup_cpu is None else round(startup_cpu, 1),
        "open_ms": round(open_ms, 1),
        "diagnostics_ms": {"median": round(statistics.median(diag_ms), 2), "p95": round(pct(diag_ms, 95), 2),
                           "max": round(max(diag_ms), 2), "n": len(diag_ms)},
        "front_end_analyze_ms": round(statistics.median(front), 2),
        "front_end_analyze_cpu_ms": round(statistics.median(front_cpu), 2),
        "server_cpu_ms_per_change": None if diag_cpu is None else round(diag_cpu, 2),
        "server_cpu_ms_per_completion": None if comp_cpu is None else round(comp_cpu, 2),
        "completion_during_analysis_ms": {"median": round(statistics.median(busy_ms), 2),
                                           "p95": round(pct(busy_ms, 95), 2), "n": len(busy_ms)},
        "completion_ms": {"median": round(statistics.median(comp_ms), 2), "p95": round(pct(comp_ms, 95), 2),
                          "max": round(max(comp_ms), 2), "n": len(comp_ms)},
        "targets": {"diagnostics_ms": 50, "completion_ms": 20},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = asyncio.run(run(args.lines, args.rounds))
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    d, c = res["diagnostics_ms"], res["completion_ms"]
    print(f"document: {res['lines']} lines; server startup (spawn -> initialize): {res['startup_ms']} ms "
          f"({res['startup_cpu_ms']} ms CPU); "
          f"first diagnostics after didOpen: {res['open_ms']} ms")
    print(f"didChange -> publishDiagnostics: median {d['median']} ms, p95 {d['p95']} ms, max {d['max']} ms "
          f"(n={d['n']}; target < 50 ms: {d['median'] / 50:.2f}x of target)")
    fe, fc = res["front_end_analyze_ms"], res["front_end_analyze_cpu_ms"]
    print(f"  mpl.checker.analyze on the same text, in this process: median {fe} ms wall, {fc} ms CPU")
    if res["server_cpu_ms_per_change"] is not None:
        sc = res["server_cpu_ms_per_change"]
        print(f"  server CPU per change (didChange -> publishDiagnostics): {sc} ms "
              f"(target < 50 ms: {sc / 50:.2f}x; the machine's load makes wall > CPU)")
    print(f"completion: median {c['median']} ms, p95 {c['p95']} ms, max {c['max']} ms "
          f"(n={c['n']}; target < 20 ms: {c['median'] / 20:.2f}x of target)")
    b = res["completion_during_analysis_ms"]
    print(f"completion sent right after a didChange (while the server analyses): median {b['median']} ms, "
          f"p95 {b['p95']} ms (n={b['n']})")
    if res["server_cpu_ms_per_completion"] is not None:
        print(f"  server CPU per completion: {res['server_cpu_ms_per_completion']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
