"""The public API (SPEC §9): ``load``, ``loads``, ``compile``, :class:`Policy`, :class:`PolicyError`.

``loads(text)`` = check (``mpl.checker.analyze``) -> the policy's IR -> :class:`Policy`, whose
module is ``mpl.codegen.generate``'s source through ``mpl.codegen.loader`` (compiled once,
cached by source hash), made when first asked for: a runtime on the compiled engine is made
from the IR's tables (``mpl.codegen.tables``), the module's class only for a pure one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from mpl import schema
from mpl.diagnostics import Diagnostic, PolicyError, clip_text

__all__ = ["Policy", "PolicyError", "load", "loads", "compile", "from_ir", "load_for_replay",
           "not_live_yet", "replay"]

_SHOWN = 5   # errors rendered into the exception message


def render(d: Diagnostic) -> str:
    """One line (a message quoting a huge token is cut: mpl.diagnostics.clip_text)."""
    where = f"{d.file or '<text>'}:{d.span.line}:{d.span.column}"
    return f"{where}: {d.severity.value} {d.code}: {clip_text(d.message)}"


def _errors_message(errors: list[Diagnostic]) -> str:
    lines = [render(d) for d in errors[:_SHOWN]]
    more = len(errors) - _SHOWN
    if more > 0:
        lines.append(f"... and {more} more error{'s' if more > 1 else ''}")
    head = f"the policy has {len(errors)} error{'s' if len(errors) > 1 else ''}:"
    return head + "\n  " + "\n  ".join(lines)


class Policy:
    """A checked, compiled policy. ``module`` is the generated Python module; ``source``
    its source (both made on first use: a replay or a runtime on the compiled engine needs
    neither). ``checked_text``: the ``.moe`` text the policy was checked from (``path``
    names its file, if any), so that a later check against a model's shape (attach, an
    engine's preflight) reports located diagnostics in that text; None for a policy built
    otherwise (the eDSL), whose canonical :meth:`text` stands in."""

    def __init__(self, ir, source: str | None = None, module=None, diagnostics=(), path=None,
                 checked_text=None):
        self.ir = ir
        self.name = ir.name
        self._source = source
        self._module = module
        self._tables = None
        self.diagnostics = list(diagnostics)
        self.path = path
        self.checked_text = checked_text
        #: model shape -> the model-aware errors that make a replay on it meaningless, for
        #: the shapes this policy was checked against already (:func:`load_for_replay`)
        self.fits: dict = {}

    def __repr__(self) -> str:
        return f"<mpl.Policy {self.name!r}{' from ' + self.path if self.path else ''}>"

    @property
    def source(self) -> str:
        """The generated module's source (:func:`mpl.codegen.generate`)."""
        if self._source is None:
            from mpl.codegen import generate
            self._source = generate(self.ir)
        return self._source

    @property
    def module(self):
        """The generated module (compiled once per source: :mod:`mpl.codegen.loader`)."""
        if self._module is None:
            from mpl.codegen.loader import load_source
            self._module = load_source(self.source)
        return self._module

    def runtime(self, num_layers: int, num_experts: int, top_k: int, *, expert_bytes=None,
                cost=None, backend=None, layer_ids=None, stored_bits=None):
        """A fresh runtime (no torch): ``dispatch(layer, experts, weights=None, tokens=1)``;
        what the module's ``make_runtime`` makes, from the same tables."""
        from mpl.runtime.backend import make

        t = self._tables
        if t is None:
            from mpl.codegen.tables import tables
            from mpl.runtime.values import Count, Size
            t = self._tables = tables(self.ir, Size, Count)
        return make(self._pure, t.params, t.features, t.conditions, t.actions, t.rules,
                    num_layers, num_experts, top_k, expert_bytes=expert_bytes, cost=cost,
                    backend=backend, policy=self.name, layer_ids=layer_ids,
                    stored_bits=stored_bits)

    def _pure(self, lay, params, features, rules):
        """The pure backend: the generated module's runtime class."""
        from mpl.codegen.generator import class_name
        return getattr(self.module, class_name(self.ir))(lay, params, features, rules=rules)

    def attach(self, model, **kw):
        from mpl.offload import attach
        return attach(self, model, **kw)

    def from_pretrained(self, folder, **kw):
        """The HuggingFace MoE model saved in ``folder`` loaded without its experts (never in
        host memory) and this policy attached: its disk tier without ``path`` reads them
        from the checkpoint (``mpl.offload.from_pretrained``; the Handle's ``model``)."""
        from mpl.offload import from_pretrained
        return from_pretrained(folder, self, **kw)

    def shadow(self, model, **kw):
        """The policy in shadow mode beside a HuggingFace ``model`` left unchanged
        (``mpl.offload.shadow``)."""
        from mpl.offload import shadow
        return shadow(self, model, **kw)

    def replay(self, trace, **kw):
        from mpl.sim.replay import replay
        return replay(self, trace, **kw)

    def with_params(self, overrides: dict):
        """This policy with ``overrides`` ("block.name" -> value) set in its text, checked
        again for replay (what ``replay(..., params=...)`` replays)."""
        return load_for_replay(self, overrides=overrides)

    def compile(self) -> str:
        """The generated module source."""
        return self.source

    def text(self) -> str:
        """Canonical ``.moe`` text of this policy (re-checks to the same IR); made once per
        IR object (a replay, a sweep point and a preflight each ask for it)."""
        made = getattr(self, "_text", None)
        if made is not None and made[0] is self.ir:
            return made[1]
        text = render_ir(self.ir)
        try:
            from mpl.fmt import format_text
            text = format_text(text)
        except Exception:     # the formatter is an optional nicety here (or not installed)
            pass
        self._text = (self.ir, text)
        return text


def not_live_yet(pir, engine: str = "huggingface") -> str | None:
    """Why a policy cannot run live yet in ``engine`` ("huggingface" or "vllm"), in one
    located line (None: it can): what the live mechanism runs is its own to say
    (:func:`mpl.mechanism.preflight.not_live_yet`)."""
    from mpl.mechanism.preflight import not_live_yet as why

    return why(pir, engine)


def from_ir(pir, *, diagnostics=(), path=None, checked_text=None) -> Policy:
    """The :class:`Policy` of an IR (checked already; its module is generated when first
    asked for). ``checked_text``: the text the IR was checked from."""
    return Policy(pir, None, None, diagnostics, path, checked_text)


def _select(analysis, policy: str | None, path: str | None) -> Policy:
    errors = [d for d in analysis.diagnostics if d.is_error]
    if errors:
        raise PolicyError(_errors_message(errors), errors)
    names = list(analysis.ir)
    where = path or "the text"
    if policy is None:
        if not names:
            raise PolicyError(f"{where} defines no policy", analysis.diagnostics)
        if len(names) > 1:
            raise PolicyError(f"{where} defines {len(names)} policies ({', '.join(names)}): "
                              f"choose one with policy='NAME'", analysis.diagnostics)
        policy = names[0]
    if policy not in analysis.ir:
        listing = ", ".join(names) if names else "none"
        raise PolicyError(f"no policy named {policy!r} in {where} (it defines: {listing})",
                          analysis.diagnostics)
    return from_ir(analysis.ir[policy], diagnostics=analysis.diagnostics, path=path,
                   checked_text=analysis.text)


def loads(text: str, policy: str | None = None, *, path: str | None = None) -> Policy:
    """Check and compile policy text. Raises :class:`PolicyError` on errors."""
    from mpl.checker import analyze
    if not isinstance(text, str):
        raise TypeError(f"loads() expects the policy text as str, not {type(text).__name__}")
    return _select(analyze(text, path), policy, path)


def load(path, policy: str | None = None) -> Policy:
    """Check and compile a ``.moe`` file (or a standard policy, ``"std/NAME"``).
    Raises :class:`PolicyError` on errors (TypeError when ``path`` is not a path)."""
    from mpl.checker import as_path, read_source
    from mpl.stdlib_path import resolve

    path = resolve(as_path(path, "load", "; use mpl.loads() for policy text"))
    text, err = read_source(path)   # the checker's bounded reader; its MPL100 says why
    if err is not None:
        raise PolicyError(f"cannot read {path}: {err.message}")
    return loads(text, policy, path=path)


def compile(text_or_path, policy: str | None = None) -> str:   # noqa: A001 (public name)
    """The generated module source for a policy given as text or as a file path."""
    s = os.fspath(text_or_path)
    looks_like_path = ("\n" not in s and "{" not in s
                       and (s.endswith(schema.FILE_EXTENSIONS) or os.path.isfile(s)))
    pol = load(s, policy) if looks_like_path else loads(s, policy)
    return pol.source


# ---------------------------------------------------------------- replay: text -> policy
# mpl.sim takes a policy; turning a .moe path or text (and overrides) into one is this layer's.
@dataclass
class OraclePolicy:
    """A policy whose eviction is ``belady``: no runtime, the oracle answers."""
    name: str
    ir: Any
    source: str

    def text(self) -> str:
        return self.source

    def with_params(self, overrides: dict):
        return load_for_replay(self, overrides=overrides)


def _looks_like_path(s: str) -> bool:
    """A .moe / .policy name, an existing file, or one word with a folder or an extension
    (policy text always has a space or a brace)."""
    if "{" in s or "\n" in s:
        return False
    if s.endswith((".moe", ".policy")) or os.path.isfile(s):
        return True
    return not any(c.isspace() for c in s) and (os.sep in s or bool(os.path.splitext(s)[1]))


def load_for_replay(policy, *, name: str | None = None, overrides: dict | None = None,
                    model=None):
    """A Policy ready for replay: an mpl Policy (returned as is without overrides), a path
    to a .moe file, or .moe text. ``overrides`` ("block.name" -> value) edit the text and
    check it again. Replay-only values (eviction = belady) are accepted.

    ``model``: the shape of the trace it will replay (:func:`mpl.sim.replay.shape_of`): the
    text is checked once with the model-aware rules too, and when that is clean the replay's
    own model-aware check of that shape (:func:`mpl.sim.replay.check_fits`) reads the result
    (:attr:`Policy.fits`) instead of checking the policy's text again; the policy's
    diagnostics then include the model-aware warnings. With errors the text is checked as
    without ``model`` (what a model-aware error means is the replay's to say)."""
    from mpl.checker import REPLAY, analyze, read_source
    from mpl.sim.replay import PolicyLoadError, _uses_belady
    from mpl.sim.variants import set_params

    path = None
    if isinstance(policy, (str, os.PathLike)) and _looks_like_path(os.fspath(policy)):
        from mpl.stdlib_path import resolve
        path = resolve(os.fspath(policy))     # std/NAME: the shipped policy's file
        text, err = read_source(path)
        if err is not None:
            raise PolicyLoadError(err.message, [err])
    elif isinstance(policy, str):
        text = policy
    else:
        if not (hasattr(policy, "text") and hasattr(policy, "ir")):
            raise TypeError(f"policy must be an mpl Policy, a .moe path or policy text, not "
                            f"{type(policy).__name__}")
        if not overrides:
            return policy
        text = policy.text()
        name = name or policy.name
    if overrides:
        from mpl.sim.variants import VariantError
        try:
            text = set_params(text, overrides, policy=name)
        except VariantError as e:           # a bad override value, or no such policy
            raise PolicyLoadError(str(e)) from None
    an = analyze(text, path, purpose=REPLAY, model=model) if model is not None else None
    fits = {model: ()} if an is not None and not an.errors else None
    if fits is None:
        an = analyze(text, path, purpose=REPLAY)
    if an.errors:
        first = an.errors[0]
        raise PolicyLoadError(f"{first.file or path or '<policy>'}:{first.span.line}:"
                              f"{first.span.column}: {first.message} [{first.code}]",
                              an.diagnostics)
    if not an.ir:
        raise PolicyLoadError(f"{path or '<policy>'}: defines no policy")
    if name is None:
        if len(an.ir) > 1:
            raise PolicyLoadError(f"{path or '<policy>'} defines several policies "
                                  f"({', '.join(an.ir)}): choose one with --policy-name")
        name = next(iter(an.ir))
    if name not in an.ir:
        raise PolicyLoadError(f"no policy named '{name}' (defined: {', '.join(an.ir)})")
    ir = an.ir[name]
    if _uses_belady(ir):
        return OraclePolicy(name, ir, text)
    # the user's own text (no overrides) locates a later model-aware error in their file
    pol = from_ir(ir, diagnostics=an.diagnostics, path=path,
                  checked_text=text if path is not None and not overrides else None)
    if fits is not None:
        pol.fits.update(fits)
    return pol


def replay(policy, trace, *, capacity=None, params: dict | None = None, **kw):
    """``mpl.replay`` / ``mpl.sim.replay``: :func:`mpl.sim.replay.replay` for a ``policy``
    that may also be a ``.moe`` path or policy text, loaded for replay with the overrides;
    other arguments as there. Errors come in the order they always did: a bad override
    (before it touches the text), then the trace, then the policy text."""
    from mpl.sim.replay import _as_trace, _check_fit, _checked_overrides, replay as replay_policy

    if isinstance(policy, (str, os.PathLike)):
        _checked_overrides(capacity, params)
        trace = _as_trace(trace)
        _check_fit(trace.header)
        # (the overrides are applied by the replay, which knows what a capacity means for
        # the policy: its cache's, or its top tier's)
        policy = load_for_replay(policy)
    return replay_policy(policy, trace, capacity=capacity, params=params, **kw)


# ---------------------------------------------------------------- IR -> .moe text
def _value_text(key: str, v, *, single: bool = False) -> str:
    """``v`` as written for ``key``; ``single``: where the grammar takes one value (an adapt
    action, a conditional alternative), so LFU with an LRU fallback is its name there."""
    if single and key == "cache.eviction" and v == schema.FALLBACK_PAIR:
        return "fallback"
    if hasattr(v, "bytes") and not isinstance(v, (bytes, bytearray)):
        b = int(v.bytes)
        for unit in ("GiB", "MiB"):
            f = schema.UNITS[unit].factor
            if b % int(f) == 0:
                return f"{b // int(f)}{unit}"
        return f"{b / 1e6:g}MB"
    if hasattr(v, "n") and hasattr(v, "unit"):
        return f"{v.n} {v.unit}"
    if key == "cache.eviction" and isinstance(v, str) and "|" in v:
        return " | ".join(v.split("|"))
    return schema.format_value(v)


def _cond_text(c) -> str:
    return f"{c.metric} {c.op} {schema.format_value(float(c.threshold))}"


def _eviction_text(ev) -> str:
    w = getattr(ev, "weights", None)
    if w is None:
        return str(ev)
    return (f"{schema.WEIGHTED_SUM}("
            + ", ".join(f"{r} = {schema.format_value(float(x))}" for r, x in w) + ")")


def _level_text(h, indent: str) -> list[str]:
    """The items of a resolved set of tiers (the implicit host tier and the defaults left
    out), as .moe lines."""
    from mpl import ir as _ir
    out = []
    for t in h.tiers:
        if t.implicit:
            continue
        parts = [f"location = {t.location}"]
        if t.dtype_ladder:
            parts.append(f"dtype_ladder = [{', '.join(t.dtype_ladder)}]")
        elif t.dtype is not None:
            parts.append(f"dtype = {t.dtype}")
        if t.capacity is not None:
            parts.append(f"capacity = {_value_text('cache.capacity', t.capacity)}")
        if t.residency != "on_demand":
            parts.append(f"residency = {t.residency}")
        if t.eviction is not None and t.eviction != h.eviction:
            parts.append(f"eviction = {_eviction_text(t.eviction)}")
        if t.path is not None:
            quoted = (t.path.replace("\\", "\\\\").replace('"', '\\"')
                      .replace("\n", "\\n").replace("\t", "\\t"))
            parts.append(f'path = "{quoted}"')
        out.append(f"{indent}tier {t.name} {{ {'  '.join(parts)} }}")
    for m in h.transitions:
        if _ir.HOST_TIER in (m.source, m.target):
            continue
        parts = []
        if m.mechanism != "copy":
            parts.append(f"mechanism = {m.mechanism}")
        if m.trigger_threshold is not None:
            parts.append(f"trigger_threshold = {schema.format_value(float(m.trigger_threshold))}")
        if parts:
            out.append(f"{indent}on {m.event}({m.source} -> {m.target}) {{ {'  '.join(parts)} }}")
    out.append(f"{indent}eviction = {_eviction_text(h.eviction)}")
    if h.granularity_split != 1:
        out.append(f"{indent}granularity_split = {h.granularity_split}")
    return out


def _tiers_text(pir) -> list[str]:
    """A tiered policy's ``hierarchy`` and ``per_layer_hierarchy`` blocks, resolved."""
    out = []
    if pir.hierarchy is not None:
        out += ["    hierarchy {", *_level_text(pir.hierarchy, " " * 8), "    }"]
    if pir.bands:
        out.append("    per_layer_hierarchy {")
        for b in pir.bands:
            out += [f"        band layers = {b.layers.first}..{b.layers.last} {{",
                    *_level_text(b.hierarchy, " " * 12), "        }"]
        out.append("    }")
    return out


def render_ir(pir) -> str:
    """Render an IR as ``.moe`` text: every block present, every non-default parameter, the
    cache's per-layer pins, conditional values as ``a : b when c``, the memory tiers and the
    adapt rules."""
    from mpl import ir as _ir
    conditional = {}      # key -> (alternative, condition)
    rules = []
    for r in pir.adapt:
        if r.origin == "conditional":
            if r.inverse_of is None and len(r.actions) == 1 and isinstance(r.actions[0], _ir.SetAction):
                a = r.actions[0]
                conditional[a.key] = (a.value, r.condition)
            continue
        rules.append(r)
    out = [f"policy {pir.name} {{"]
    for bname in schema.BLOCK_ORDER:
        blk = schema.BLOCKS[bname]
        if blk.rules or not blk.flat:     # adapt and memory tiers: below
            continue
        lines = []
        for p in blk.params:
            v = pir.values[p.key]
            default = p.default
            if default in (schema.OFF, schema.DERIVED):
                default = None
            same = (v == default or (isinstance(default, tuple) and tuple(v or ()) == default))
            if v is None and p.key not in conditional:
                continue         # not set (cache.capacity where per_layer.total_budget gives it)
            if p.key in conditional or not same or p.required:
                text = _value_text(p.key, v)
                if p.key in conditional:
                    alt, cond = conditional[p.key]
                    text += f" : {_value_text(p.key, alt, single=True)} when {_cond_text(cond)}"
                lines.append(f"        {p.name} = {text}")
        if bname == "cache":
            lines += [f"        pin layers = {lp.layers.first}..{lp.layers.last} "
                      f"{{ experts = [{', '.join(map(str, lp.experts))}] }}" for lp in pir.layer_pins]
        if lines or bname in pir.blocks:
            out.append(f"    {bname} {{")
            out.extend(lines)
            out.append("    }")
    out += _tiers_text(pir)
    if rules:
        out.append("    adapt {")
        for r in rules:
            dur = f" for {r.duration.n} {r.duration.unit}" if r.duration.n else ""
            acts = []
            for a in r.actions:
                if isinstance(a, _ir.SetAction):
                    acts.append(f"{a.key} = {_value_text(a.key, a.value, single=True)}")
                elif isinstance(a, _ir.TriggerAction):
                    acts.append(f"trigger {a.trigger}")
                else:
                    acts.append(f"rebalance {a.allocation}")
            out.append(f"        when {_cond_text(r.condition)}{dur} {{ {'  '.join(acts)} }}")
        out.append("    }")
    out.append("}")
    return "\n".join(out) + "\n"
