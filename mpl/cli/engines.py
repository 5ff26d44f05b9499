"""The engines ``mplc run`` and ``mplc trace record`` drive, in one table.

A row names the engine's adapter module (imported only when that engine is asked for: the
vLLM one imports no vllm in this process, the HuggingFace one imports torch and
transformers) and its command-line entry points there, each ``(args, prog) -> exit status``:

* ``preflight`` — the policy (if any) checked against the model before anything starts;
  returns None to go on, or an exit status after printing why not. A policy that does not
  fit is raised as :class:`mpl.PolicyDoesNotFit`, and printed here (:func:`call`) with its
  located diagnostics, whichever engine found it and whenever (an engine may find it again
  once the model is built);
* ``run`` — ``mplc run`` with the policy live (its runtime decides what the engine holds);
* ``shadow`` — ``mplc run`` with the policy in shadow mode beside the unchanged engine;
* ``record`` — ``mplc trace record``.

``default_mode`` is what ``mplc run`` does without ``--shadow`` / ``--offload`` (``--offload``
is vLLM's spelling of live). ``options`` are the engine-only options the engine takes (any
other engine's is a usage error naming the engines that take it), ``shadow_options`` those it
takes only in shadow mode. ``record_policy``: ``mplc trace record POLICY`` runs the policy
live while recording. Adding an engine is one row here plus its adapter module.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    name: str
    help: str                           # one line, for --engine's help
    adapter: str                        # the module holding the entry points
    default_mode: str                   # "live" or "shadow"
    options: tuple[str, ...] = ()       # engine-only options it takes, in any mode
    shadow_options: tuple[str, ...] = ()    # ... and only in shadow mode
    record_policy: bool = False
    preflight: str = "preflight"
    run: str = "run"
    shadow: str = "shadow"
    record: str = "record"

    def entry(self, name: str):
        """The adapter's entry point ``name`` (one of preflight, run, shadow, record)."""
        return getattr(importlib.import_module(self.adapter), getattr(self, name))


ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine("hf", "transformers in this process (default)", "mpl.offload.cli",
           default_mode="live", record_policy=True,
           options=("--device", "--experts-implementation", "--lookahead", "--trace"),
           shadow_options=("--hardware",)),
    Engine("vllm", "a vLLM engine with mpl's routing capture, in vLLM's own Python (a local "
                   "model folder; docs/vllm.md)", "mpl.vllm.launch",
           default_mode="shadow", run="run", shadow="run",
           options=("--vllm-python", "--dtype", "--tensor-parallel-size", "--offload",
                    "--stream-slots", "--hardware", "--trace", "--lookahead")),
)}
DEFAULT = "hf"

#: every engine-only option, in the order a usage error names the first one given
_ALL_OPTIONS = tuple(dict.fromkeys(o for e in ENGINES.values() for o in (*e.options, *e.shadow_options)))


def _given(args, option: str) -> bool:
    value = getattr(args, option[2:].replace("-", "_"), None)
    return value is not None and value is not False


def _taking(option: str, *, live: bool) -> list[str]:
    return [e.name for e in ENGINES.values()
            if option in e.options or (not live and option in e.shadow_options)]


def mode(engine: Engine, args) -> str:
    """``live`` or ``shadow``: what ``mplc run`` does with ``engine``."""
    if getattr(args, "shadow", False):
        return "shadow"
    if getattr(args, "offload", False):
        return "live"
    return engine.default_mode


def misused_option(engine: Engine, args, run_mode: str | None = None) -> str | None:
    """The usage error for the first engine-only option given that ``engine`` does not take
    (in ``run_mode``, for ``mplc run``), or None."""
    for option in _ALL_OPTIONS:
        if not _given(args, option) or option in engine.options:
            continue
        if option in engine.shadow_options:
            if run_mode != "live":
                continue
            others = [n for n in _taking(option, live=True) if n != engine.name]
            alt = f"--engine {' or '.join(others)} or " if others else ""
            return f"{option} needs {alt}--shadow (with --engine {engine.name} it serves the shadow mode)"
        return f"{option} needs --engine {' or '.join(_taking(option, live=False))}"
    return None


def call(engine: Engine, name: str, args, prog: str) -> int:
    """The engine's ``preflight`` and then its entry point ``name``; a policy that does not
    fit the model is printed with its located diagnostics (exit 1)."""
    from mpl.mechanism.preflight import PolicyDoesNotFit

    try:
        rc = engine.entry("preflight")(args, prog)
        if rc is not None:
            return rc
        return int(engine.entry(name)(args, prog) or 0)
    except PolicyDoesNotFit as e:
        return does_not_fit(prog, getattr(args, "policy", None), e)


def does_not_fit(prog: str, spec: str | None, e) -> int:
    """Print a misfit as ``mplc check`` prints diagnostics (located, with the source line),
    then one line saying what was not done; returns 1."""
    from mpl.cli.render import render_all, use_color
    from mpl.fileio import read_text_or_none

    print(render_all(e.diagnostics, lambda f: e.text if f == e.path else read_text_or_none(f),
                     color=use_color(sys.stderr)), file=sys.stderr)
    n = len(e.diagnostics)
    on = f" for {e.model}" if e.model else ""
    print(f"{prog}: error: {spec or e.path or 'the policy'}: does not fit the model{on} "
          f"({n} error{'s' if n > 1 else ''}); {e.consequence}", file=sys.stderr)
    return 1
