"""Run the hostile-input corpus (``tests/hostile/make_corpus.py``) through ``mplc`` on both
runtime backends, each command in its own process under a memory and a time limit.

    python tests/hostile/run_all.py                 # the whole corpus, both backends
    python tests/hostile/run_all.py --fast          # the subset the test suite runs
    python tests/hostile/run_all.py -k wide_ -j 2   # cases whose file name contains "wide_"
    python tests/hostile/run_all.py --keep DIR      # build the corpus in DIR and keep it

A command passes when it exits 0 or 1 (1 with a message; an "error" case must exit 1 and its
message must name what the case names: the parameter, the value, the limit), prints no
traceback and no "internal error", stays under ``--mem-gb`` of address space (RLIMIT_AS; the
peak RSS is measured too) and ``--timeout`` seconds, and gives the same exit status, standard
output and standard error on the compiled backend as with ``MPL_PURE=1``. The summary counts
the exit statuses per backend and gives the peak RSS and the longest run; the exit status is 1
when any command fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import make_corpus  # noqa: E402

BACKENDS = ("compiled", "pure")


@dataclass
class Result:
    case: str
    args: list
    backend: str
    rc: int
    stdout: str
    stderr: str
    seconds: float
    maxrss_mb: float
    killed: bool = False


def _env(backend: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["NO_COLOR"] = "1"
    env["MPL_PURE"] = "1" if backend == "pure" else "0"
    env.pop("MPL_DEBUG", None)
    return env


def run_one(args: list[str], cwd: Path, backend: str, mem_bytes: int, timeout: float,
            case: str = "") -> Result:
    """``mplc ARGS`` in a child process limited to ``mem_bytes`` of address space, killed
    after ``timeout`` seconds; its peak RSS from ``wait4``."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "mpl.cli.main", *args], cwd=cwd,
                             stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                             env=_env(backend), preexec_fn=limit)
        killed = []
        timer = threading.Timer(timeout, lambda: (killed.append(1), p.kill()))
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        dt = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        return Result(case, args, backend, rc, out.read().decode("utf-8", "replace"),
                      err.read().decode("utf-8", "replace"), dt, ru.ru_maxrss / 1024.0,
                      bool(killed))


_BACKEND_LINE = re.compile(r"^  runtime +\S+: .*\n?", re.M)


def _results(stdout: str) -> str:
    """A report without the one line that says which backend ran the policy and why it is
    pure (replay's "runtime" line: present when the compiled engine is in use and the policy
    or its shape needs the pure one), the only line that names a backend."""
    return _BACKEND_LINE.sub("", stdout)


def verdict(case: make_corpus.Case, res: dict[str, Result], mem_mb: float,
            timeout: float) -> list[str]:
    """What is wrong with one command's results on the backends (empty: it passes)."""
    bad = []
    for b, r in res.items():
        text = r.stdout + r.stderr
        if r.killed:
            bad.append(f"{b}: killed after {timeout:.0f} s")
        elif r.rc not in (0, 1):
            bad.append(f"{b}: exit {r.rc}" + (f" ({r.stderr.strip().splitlines()[-1][:200]})"
                                              if r.stderr.strip() else ""))
        if "Traceback" in text or "internal error" in text:
            bad.append(f"{b}: a traceback or an internal error")
        if r.maxrss_mb > mem_mb:
            bad.append(f"{b}: peak RSS {r.maxrss_mb:.0f} MB")
        if r.rc == 1 and not (r.stderr.strip() or r.stdout.strip()):
            bad.append(f"{b}: exit 1 without a message")
        if r.rc in (0, 1):
            if case.expect == "error" and r.rc != 1:
                bad.append(f"{b}: expected an error (exit 1), got exit {r.rc}")
            if case.expect == "fits" and r.rc == 1 and not re.search(r"MPL[35]\d\d", text):
                msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
                bad.append(f"{b}: a value in range refused: {msg[-1][:200] if msg else ''}")
            if case.expect == "ok" and r.rc != 0:
                msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
                bad.append(f"{b}: expected success, got exit {r.rc}: {msg[-1][:200] if msg else ''}")
            if case.expect == "error" and r.rc == 1:
                low = text.lower()
                for m in case.mention:
                    if not any(alt in low for alt in m.split("|")):
                        bad.append(f"{b}: the message does not name {m!r}: "
                                   f"{text.strip().splitlines()[-1][:200] if text.strip() else ''}")
    vals = list(res.values())
    if len(vals) == 2:
        a, c = vals
        sa, sc = _results(a.stdout), _results(c.stdout)
        if (a.rc, sa, a.stderr) != (c.rc, sc, c.stderr):
            bad.append("the backends differ: "
                       + ("exit %d vs %d" % (a.rc, c.rc) if a.rc != c.rc else
                          "stdout differs" if sa != sc else "stderr differs"))
    return bad


def _check_compiled() -> str | None:
    r = subprocess.run([sys.executable, "-c", "from mpl.runtime.backend import info as b; "
                        "i = b(); print(i['backend'], i['reason'] or '')"],
                       capture_output=True, text=True, env=_env("compiled"), cwd=ROOT)
    line = r.stdout.strip()
    return None if line.startswith("compiled") else (line or r.stderr.strip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast", action="store_true", help="only the cases of the pytest subset")
    ap.add_argument("-k", dest="select", default=None, help="only cases whose file name contains this")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="commands run at once (default 2)")
    ap.add_argument("--mem-gb", type=float, default=2.0, help="address-space limit per command (default 2)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per command (default 60)")
    ap.add_argument("--backend", choices=("both",) + BACKENDS, default="both")
    ap.add_argument("--keep", metavar="DIR", help="build the corpus in DIR and keep it")
    ap.add_argument("--json", metavar="FILE", help="write every result to FILE")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every command's result")
    a = ap.parse_args(argv)

    backends = BACKENDS if a.backend == "both" else (a.backend,)
    if "compiled" in backends:
        why = _check_compiled()
        if why is not None:
            print(f"the compiled backend is not in use ({why}): build it (pip install -e .) or "
                  f"pass --backend pure", file=sys.stderr)
            return 2
    tmp = None
    if a.keep:
        dest = Path(a.keep)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="mpl-hostile-")
        dest = Path(tmp.name)
    t0 = time.monotonic()
    cases = make_corpus.build(dest)
    built = time.monotonic() - t0
    if a.fast:
        cases = [c for c in cases if c.fast]
    if a.select:
        cases = [c for c in cases if a.select in c.name]
    jobs = [(c, [x.replace("{f}", c.name) for x in args], b) for c in cases for args in c.runs
            for b in backends]
    mem = int(a.mem_gb * (1 << 30))
    print(f"{len(cases)} files, {len(jobs)} commands ({', '.join(backends)}); corpus built in "
          f"{built:.1f} s in {dest}", flush=True)

    results: dict[tuple, dict[str, Result]] = {}
    lock = threading.Lock()
    done = [0]

    def work(job):
        c, args, b = job
        r = run_one(args, dest, b, mem, a.timeout, c.name)
        with lock:
            results.setdefault((c.name, tuple(args)), {})[b] = r
            done[0] += 1
            if a.verbose:
                print(f"  {b:8s} rc={r.rc} {r.seconds:5.1f}s {r.maxrss_mb:6.0f}MB  mplc {' '.join(args)}",
                      flush=True)
            elif done[0] % 100 == 0:
                print(f"  {done[0]}/{len(jobs)}", flush=True)

    with ThreadPoolExecutor(max(1, a.jobs)) as ex:
        list(ex.map(work, jobs))

    failures = []
    by_case = {c.name: c for c in cases}
    for (name, args), res in sorted(results.items()):
        for why in verdict(by_case[name], dict(sorted(res.items())), a.mem_gb * 1024, a.timeout):
            failures.append((name, args, why))

    flat = [r for res in results.values() for r in res.values()]
    print()
    for b in backends:
        rs = [r for r in flat if r.backend == b]
        counts: dict[int, int] = {}
        for r in rs:
            counts[r.rc] = counts.get(r.rc, 0) + 1
        top_rss = max(rs, key=lambda r: r.maxrss_mb)
        top_t = max(rs, key=lambda r: r.seconds)
        print(f"{b:8s}: {len(rs)} commands; exit " +
              ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) +
              f"; peak RSS {top_rss.maxrss_mb:.0f} MB (mplc {' '.join(top_rss.args)}); longest "
              f"{top_t.seconds:.1f} s (mplc {' '.join(top_t.args)})")
    groups: dict[str, int] = {}
    for c in cases:
        groups[c.group] = groups.get(c.group, 0) + 1
    print("files by group: " + ", ".join(f"{g} {n}" for g, n in sorted(groups.items())))
    if a.json:
        Path(a.json).write_text(json.dumps([r.__dict__ for r in flat], indent=1))
    if failures:
        print(f"\n{len(failures)} FAILURES:")
        for name, args, why in failures:
            print(f"  {name}: mplc {' '.join(args)}: {why}")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
