"""Checks made before a vLLM engine starts: the policy against the model's shape (the
checker's model-aware rules: a pinned expert the model does not have, a budget below the
minimum, ...), so located diagnostics come before a 30-second start-up, not after. No
vllm import."""

from __future__ import annotations

import os

from .errors import VllmIntegrationError


class PolicyDoesNotFit(VllmIntegrationError):
    """The policy has errors for this model; ``.diagnostics`` holds them (located)."""

    def __init__(self, message: str, diagnostics, text: str, path: str | None) -> None:
        super().__init__(message)
        self.diagnostics = list(diagnostics)
        self.text = text
        self.path = path


def model_shape(model: str):
    """The ModelShape of a local model folder (its config.json); None for a hub name
    (checked inside the worker, from the config vLLM loaded)."""
    from mpl import shapes

    if not os.path.exists(model):
        return None
    try:
        return shapes.from_config(model)
    except shapes.ShapeError as e:
        raise VllmIntegrationError(f"{model}: {e}") from None


def policy_source(policy) -> tuple[str, str | None, str | None]:
    """(text, path, name) of ``policy``: an mpl Policy, a .moe path, ``std/NAME`` or text."""
    if hasattr(policy, "ir") and hasattr(policy, "text"):
        path = getattr(policy, "path", None)
        if path and os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return f.read(), path, policy.name
        return policy.text(), None, policy.name
    if not isinstance(policy, (str, os.PathLike)):
        raise TypeError(f"policy must be an mpl Policy, a .moe path or policy text, not "
                        f"{type(policy).__name__}")
    s = os.fspath(policy)
    from mpl.stdlib_path import resolve

    path = resolve(s) if ("\n" not in s and "{" not in s) else None
    if path is not None and os.path.isfile(path):
        from mpl.checker import read_source
        text, err = read_source(path)
        if err is not None:
            raise VllmIntegrationError(f"cannot read {s}: {err.message}")
        return text, path, None
    if "{" not in s:
        raise VllmIntegrationError(f"no such policy file: {s}")
    return s, None, None


def check_live(text: str, path: str | None, name: str | None) -> None:
    """Raise VllmIntegrationError when the policy cannot run live yet (memory tiers:
    mpl.api.not_live_yet), before an engine starts."""
    from mpl.api import not_live_yet
    from mpl.checker import analyze

    an = analyze(text, path)
    ir = an.ir.get(name) if name else (next(iter(an.ir.values())) if len(an.ir) == 1 else None)
    why = not_live_yet(ir) if ir is not None else None
    if why:
        raise VllmIntegrationError(why)


def check_policy(text: str, path: str | None, name: str | None, shape) -> None:
    """Raise PolicyDoesNotFit with the checker's errors for ``shape`` (None: no shape
    known yet, the rules that need none still run)."""
    from mpl.checker import LIVE, analyze

    an = analyze(text, path, model=shape, purpose=LIVE)
    errors = [d for d in an.diagnostics if d.is_error]
    where = path or "the policy text"
    if errors:
        first = errors[0]
        on = f" for {shape.name}" if shape is not None else ""
        raise PolicyDoesNotFit(
            f"{where}:{first.span.line}:{first.span.column}: {first.code}: {first.message} "
            f"({len(errors)} error{'s' if len(errors) > 1 else ''}{on}; the engine was not started)",
            errors, text, path)
    names = list(an.ir)
    if name is None and len(names) > 1:
        raise VllmIntegrationError(f"{where} defines {len(names)} policies ({', '.join(names)}): "
                                   "choose one by name")
    if name is not None and name not in an.ir:
        raise VllmIntegrationError(f"no policy named {name!r} in {where} "
                                   f"(it defines: {', '.join(names) or 'none'})")
