"""The ``vllm.general_plugins`` entry point (``mpl = "mpl.vllm.plugin:register"``): routing
capture and a shadow policy in ``vllm serve``, configured by environment variables.

* ``MPL_VLLM_TRACE=PATH`` — write the routing of every step to PATH (``.mpltrace`` or
  ``.jsonl``). The file is rewritten (atomically) whenever the engine has been idle for
  ``MPL_VLLM_FLUSH_IDLE`` seconds (default 0.5) after new steps, and once more when the worker
  shuts down — so it is complete when the server stops, even though ``vllm serve`` kills its
  engine processes without a grace period unless ``--shutdown-timeout`` is given. ``{dp}`` in PATH is replaced by the data-parallel rank
  (each engine writes its own trace; with data parallelism and no ``{dp}``, ``.dpN`` is
  added before the extension).
* ``MPL_VLLM_POLICY=FILE_OR_STD`` (optional ``MPL_VLLM_POLICY_NAME``, ``MPL_VLLM_HARDWARE``)
  — run the policy in shadow mode; ``MPL_VLLM_STATS=PATH`` writes its report (JSON) when
  the server stops; a one-line summary is logged either way.
* ``MPL_VLLM_OFFLOAD=1`` (with ``MPL_VLLM_POLICY``) — run the policy live instead: every
  worker moves its experts to a host store and a slot pool sized by the policy, whose
  runtime decides what the engine holds (``MPL_VLLM_STREAM_SLOTS=N``: transient entries,
  default a few per routed expert on the CPU build without memory tiers, on a GPU and with
  memory tiers a quarter of the device cache, at least that and at most one per expert);
  the stats file then has the mechanism's ``offload``
  block.

Without ``MPL_VLLM_TRACE`` and ``MPL_VLLM_POLICY`` the plugin does nothing. vLLM loads it in
every process; only the model runners of the workers are patched (``load_model`` installs
the session once the weights are loaded, so a model mpl cannot record fails at start-up,
not at the first request; ``shutdown`` writes the files). Start the server with
``--enforce-eager``: compiled mode is refused.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time

from mpl import traceio

ENV_TRACE = "MPL_VLLM_TRACE"
ENV_POLICY = "MPL_VLLM_POLICY"
ENV_POLICY_NAME = "MPL_VLLM_POLICY_NAME"
ENV_HARDWARE = "MPL_VLLM_HARDWARE"
ENV_STATS = "MPL_VLLM_STATS"
ENV_FLUSH_IDLE = "MPL_VLLM_FLUSH_IDLE"
ENV_OFFLOAD = "MPL_VLLM_OFFLOAD"
ENV_STREAM_SLOTS = "MPL_VLLM_STREAM_SLOTS"

log = logging.getLogger("mpl.vllm")
_patched = False


def config_from_env(environ=os.environ) -> dict | None:
    """The session config the environment asks for (None: the plugin is off). Reads and
    checks the policy file here, so a missing file is a start-up error."""
    trace, policy = environ.get(ENV_TRACE), environ.get(ENV_POLICY)
    if not trace and not policy:
        return None
    cfg = {"trace_path": trace or None, "stats_path": environ.get(ENV_STATS) or None,
           "hardware": environ.get(ENV_HARDWARE) or None, "policy_text": None,
           "policy_name": environ.get(ENV_POLICY_NAME) or None, "policy_path": None}
    if policy:
        from .errors import PREFLIGHT
        text, path, name = PREFLIGHT.policy_source(policy)
        cfg.update(policy_text=text, policy_path=path, policy_name=cfg["policy_name"] or name)
    if trace:
        traceio.kind_of(trace)
    from .errors import VllmIntegrationError

    off = (environ.get(ENV_OFFLOAD) or "0").strip().lower()
    if off not in ("0", "1", "true", "false", "yes", "no", ""):
        raise VllmIntegrationError(f"{ENV_OFFLOAD} must be 1 or 0, got {environ.get(ENV_OFFLOAD)!r}")
    cfg["offload"] = off in ("1", "true", "yes")
    if cfg["offload"] and not policy:
        raise VllmIntegrationError(f"{ENV_OFFLOAD}=1 needs {ENV_POLICY}: the policy's runtime "
                                   "decides which experts the engine holds")
    slots = environ.get(ENV_STREAM_SLOTS)
    cfg["stream_slots"] = None
    if slots:
        if not cfg["offload"]:
            raise VllmIntegrationError(f"{ENV_STREAM_SLOTS} sizes the live offload pool: it needs "
                                       f"{ENV_OFFLOAD}=1")
        try:
            cfg["stream_slots"] = int(slots)
        except ValueError:
            cfg["stream_slots"] = -1
        if cfg["stream_slots"] < 1:
            raise VllmIntegrationError(f"{ENV_STREAM_SLOTS} must be an integer >= 1, got {slots!r}")
    try:
        cfg["flush_idle"] = float(environ.get(ENV_FLUSH_IDLE) or 0.5)
    except ValueError:
        raise VllmIntegrationError(f"{ENV_FLUSH_IDLE} must be a number of seconds, got "
                                   f"{environ.get(ENV_FLUSH_IDLE)!r}") from None
    return cfg


def output_path(path: str, dp_rank: int, dp_size: int) -> str:
    if "{dp}" in path:
        return path.replace("{dp}", str(dp_rank))
    if dp_size > 1:
        root, ext = os.path.splitext(path)
        return f"{root}.dp{dp_rank}{ext}"
    return path


class Writer:
    """Writes a session's trace and shadow report: after each idle spell (a daemon thread
    polls) and at shutdown. Only the recording rank (tensor-parallel rank 0) writes."""

    def __init__(self, session, cfg: dict) -> None:
        self.session, self.cfg = session, cfg
        pc = session.runner.vllm_config.parallel_config
        dp_rank = int(getattr(pc, "data_parallel_rank", 0) or 0)
        dp_size = int(getattr(pc, "data_parallel_size", 1) or 1)
        self.trace_path = output_path(cfg["trace_path"], dp_rank, dp_size) if cfg.get("trace_path") else None
        self.stats_path = output_path(cfg["stats_path"], dp_rank, dp_size) if cfg.get("stats_path") else None
        self.written = 0            # steps in the files on disk
        self.lock = threading.Lock()
        self.done = False
        self._stop = threading.Event()
        if session.rank == 0:
            threading.Thread(target=self._poll, name="mpl-trace-writer", daemon=True).start()

    def _poll(self) -> None:
        idle = max(0.05, float(self.cfg.get("flush_idle", 0.5)))
        last, since = -1, time.monotonic()
        while not self._stop.wait(min(0.2, idle / 2)):
            steps = self.session.capture.step + 1
            if steps != last:
                last, since = steps, time.monotonic()
            elif steps > self.written and time.monotonic() - since >= idle:
                try:
                    self.write(final=False)
                except Exception as e:        # logged; the final write tries again
                    log.warning("mpl: cannot write the trace yet: %s", e)

    def write(self, final: bool) -> None:
        if self.session.rank != 0:
            return
        with self.lock:
            if self.done:
                return
            steps, trace, rep = self.session.snapshot()
            if self.trace_path and trace is not None:
                traceio.save(trace, self.trace_path)
            if rep is not None and self.stats_path:
                from mpl.fileio import atomic_open
                with atomic_open(self.stats_path, "w") as f:
                    json.dump(rep, f, indent=2, default=str)
            self.written = steps
            if final:
                self.done = True
                self._stop.set()
                _log_final(trace, self.trace_path, rep)


def _log_final(trace, path, rep) -> None:
    if trace is not None and path:
        log.warning("mpl: wrote %d dispatches over %d steps to %s", len(trace), trace.num_steps, path)
    if rep is not None and rep.get("mode") == "offload":
        s, m = rep["stats"], rep["offload"]
        log.warning("mpl: policy %s (live offload): accesses %d hit rate %.3f loads %d evictions %d "
                    "copies %d streamed %d pool %d slots (%d bytes) stall %.2f ms measured",
                    rep["policy"], s["accesses"], s["hit_rate"], s["loads"], s["evictions"],
                    m["copies"], m["stream_copies"], m["pool_slots"], m["pool_bytes"], s["stall_ms"])
    elif rep is not None:
        s = rep["stats"]
        log.warning("mpl: policy %s (shadow, %s): accesses %d hit rate %.3f loads %d evictions %d "
                    "prefetch accuracy %.3f stall %.2f ms simulated", rep["policy"],
                    rep["hardware"]["name"], s["accesses"], s["hit_rate"], s["loads"], s["evictions"],
                    s["prefetch_accuracy"], s["stall_ms"])


def _patch(cls, cfg: dict) -> None:
    from .session import ATTR, install

    load = cls.__dict__.get("load_model")
    if load is not None:
        def load_model(self, *a, _load=load, **kw):
            out = _load(self, *a, **kw)
            if getattr(self, ATTR, None) is None:
                s = install(self, {**cfg, "record": bool(cfg.get("trace_path"))})
                s.writer = Writer(s, cfg)
                atexit.register(s.writer.write, True)
            return out
        cls.load_model = load_model
    down = cls.__dict__.get("shutdown")
    if down is not None:
        def shutdown(self, *a, _down=down, **kw):
            s = getattr(self, ATTR, None)
            if s is not None:
                s.writer.write(final=True)
            return _down(self, *a, **kw)
        cls.shutdown = shutdown


def register() -> None:
    """Called by vLLM in each of its processes (possibly more than once)."""
    global _patched
    if _patched:
        return
    cfg = config_from_env()
    if cfg is None:
        return
    _patched = True
    classes = []
    try:
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner
        classes.append(GPUModelRunner)
    except ImportError:
        pass
    try:
        from vllm.v1.worker.cpu_model_runner import CPUModelRunner
        classes.append(CPUModelRunner)
    except ImportError:
        pass
    if not classes:
        from .errors import VllmIntegrationError
        raise VllmIntegrationError("this vLLM has no v1 model runner mpl can hook")
    for c in classes:
        _patch(c, cfg)
