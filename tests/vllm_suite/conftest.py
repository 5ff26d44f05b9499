"""The vLLM suite (run in its own virtual environment: tests/vllm_suite/run.sh). Skips, with the
reason, where vllm is not importable; the main suite never collects this folder."""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

try:
    import vllm  # noqa: F401
    VLLM_MISSING = None
except ImportError as e:
    VLLM_MISSING = f"vllm is not importable ({e}): run tests/vllm_suite/run.sh, which sets up its venv"


def pytest_collection_modifyitems(config, items):
    if VLLM_MISSING and os.environ.get("MPL_VLLM_REQUIRED") == "1":
        raise pytest.UsageError(VLLM_MISSING + " (MPL_VLLM_REQUIRED=1: not skipping)")
    if VLLM_MISSING:
        skip = pytest.mark.skip(reason=VLLM_MISSING)
        for it in items:
            if "needs_vllm" in it.keywords:
                it.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_vllm: starts a vLLM engine")


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("vllm-models"))


@pytest.fixture(scope="session")
def tiny(models_dir):
    """name -> folder of the tiny model (built once per session)."""
    import tiny_models

    cache: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in cache:
            cache[name] = tiny_models.build(name, os.path.join(models_dir, name))
        return cache[name]
    return get
