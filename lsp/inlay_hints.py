"""Inlay hints: the defaults that apply to parameters a block leaves unset (only those with
an effect under this configuration), and the per-layer capacities a ``per_layer`` block
implies for the model shape from the settings."""

from __future__ import annotations

from lsprotocol import types

from mpl import schema
from mpl.rules.base import capacity_slots, slots_of
from mpl.syntax import ast

from . import analysis, render
from .guard import guarded
from .tokens import COMMENT, PUNCT, tokens_before


def _has_effect(p: schema.Param, values) -> bool:
    if p.only_with is None:
        return True
    other, allowed = p.only_with
    v = values.get(other)
    if allowed == (schema.SET,):
        return v is not None
    if isinstance(v, str) and "|" in v:      # segmented eviction: either side counts
        return any(x in allowed for x in v.split("|")) or "fallback" in allowed
    return v in allowed


#: VS Code shows at most 43 characters of inlay hints per line (editor.inlayHints.maximumLength)
#: and cuts the rest mid-word: the hints of one line stay within this many characters
LINE_BUDGET = 40
DEFAULTS_PREFIX = "defaults: "


class _Braces:
    """Where the braces of a token list are, for anchoring hints: built in one pass, so
    finding a block's brace and the place of its hints takes no scan of the text after it
    (a file of many unclosed blocks on one line stays linear)."""

    def __init__(self, tokens) -> None:
        self.tokens = tokens
        n = len(tokens)
        self.match: dict[int, int] = {}      # index of a '{' -> index of its '}'
        open_: list[int] = []
        for j, t in enumerate(tokens):
            if t.kind == PUNCT and t.text == "{":
                open_.append(j)
            elif t.kind == PUNCT and t.text == "}" and open_:
                self.match[open_.pop()] = j
        #: next_brace[j]: index of the first '{' or '}' at or after j (n when none)
        self.next_brace = [n] * (n + 1)
        #: line_code_end[j]: index of the last token of j's line from j on that is not a comment
        self.line_code_end = list(range(n))
        for j in range(n - 1, -1, -1):
            t = tokens[j]
            self.next_brace[j] = j if t.kind == PUNCT and t.text in "{}" else self.next_brace[j + 1]
            nxt = tokens[j + 1] if j + 1 < n else None
            if nxt is not None and not nxt.nl_before and nxt.kind != COMMENT:
                self.line_code_end[j] = self.line_code_end[j + 1]

    def brace_after(self, offset: int) -> int | None:
        """Index of the first '{' token at or after ``offset`` (None when a '}' comes first)."""
        j = self.next_brace[tokens_before(self.tokens, offset)]
        return j if j < len(self.tokens) and self.tokens[j].text == "{" else None

    def anchor(self, brace: int) -> tuple[int, bool]:
        """(offset, more code follows on that line) for a block's hints: after its closing
        '}' when the whole block is on one line (so a hint never sits between '{' and a
        parameter written on that line), else at the end of the code on the line of its '{'."""
        tokens = self.tokens
        close = self.match.get(brace)
        if close is not None and tokens[close].line == tokens[brace].line:   # a one-line block
            nxt = tokens[close + 1] if close + 1 < len(tokens) else None
            return tokens[close].end, nxt is not None and not nxt.nl_before and nxt.kind != COMMENT
        last = self.line_code_end[brace]
        nxt = tokens[last + 1] if last + 1 < len(tokens) else None
        return tokens[last].end, nxt is not None and not nxt.nl_before


def defaults_label(entries: list[tuple[str, types.MarkupContent]], budget: int) -> list[types.InlayHintLabelPart] | None:
    """``defaults: a = 1, b = 2 +3`` within ``budget`` characters, cut between entries (never
    inside one); the ``+N`` part's tooltip names the ones left out. None when nothing fits."""
    parts = [types.InlayHintLabelPart(value=DEFAULTS_PREFIX)]
    used = len(DEFAULTS_PREFIX)
    shown = 0
    for i, (text, tip) in enumerate(entries):
        rest = len(entries) - i - 1
        more = len(f" +{rest}") if rest else 0
        sep = ", " if shown else ""
        if used + len(sep) + len(text) + more > budget:
            break
        if sep:
            parts.append(types.InlayHintLabelPart(value=sep))
        parts.append(types.InlayHintLabelPart(value=text, tooltip=tip))
        used += len(sep) + len(text)
        shown += 1
    hidden = entries[shown:]
    if hidden:
        more = f" +{len(hidden)}" if shown else f"+{len(hidden)}"
        if used + len(more) > budget:
            return None
        parts.append(types.InlayHintLabelPart(value=more, tooltip=types.MarkupContent(
            kind=types.MarkupKind.Markdown,
            value="Also left at their defaults:\n\n" + "\n".join(f"- `{t}`" for t, _ in hidden))))
    return parts


def per_layer_capacities(values, shape) -> list[int]:
    """Capacities of the MoE layers at the start (uniform split of the budget, clamped into
    [min_capacity, max_capacity]); entropy/frequency allocations rebalance from there."""
    layers = shape.num_moe_layers
    if layers <= 0:
        return []
    # the checker's slot count (a size over the written expert size, else the model's): a
    # size that gives no slot is an error (MPL507) and shows no capacities
    total = slots_of(values.get("per_layer.total_budget"), values, shape)   # a size: slots
    if total is None:
        cap = capacity_slots(values, shape, per_layer=True)
        if not cap:
            return []
        total = layers * cap
    if not total:
        return []
    lo = values.get("per_layer.min_capacity") or 1
    hi = values.get("per_layer.max_capacity") or total
    base, rem = divmod(int(total), layers)
    return [max(lo, min(hi, base + (1 if i < rem else 0))) for i in range(layers)]


def _default_entries(sb: schema.Block, b: ast.Block, ir) -> list[tuple[str, types.MarkupContent]]:
    written = {p.name.text for p in b.params}
    # a parameter that stands instead of a required one (capacity_factor) is not a default
    instead = {p.instead for p in sb.params if p.instead}
    out = []
    for p in sb.params:
        if p.name in written or p.required or p.key in instead:
            continue
        if ir is not None and not sb.flat:
            # a hierarchy's own parameters are fields of the IR's Hierarchy (extends applied)
            if ir.hierarchy is None:
                continue
            val = render.ir_value(getattr(ir.hierarchy, p.name), p)
        elif ir is not None:
            if not _has_effect(p, ir.values):
                continue
            val = render.ir_value(ir.values.get(p.key), p)
        else:
            if p.only_with is not None:
                continue
            val = p.default_text()
        out.append((f"{p.name} = {val}",
                    types.MarkupContent(kind=types.MarkupKind.Markdown, value=render.param_markdown(p))))
    return out


def _per_layer_hint(values, shape) -> tuple[str, types.MarkupContent] | None:
    caps = per_layer_capacities(values, shape)
    if not caps:
        return None
    alloc = values.get("per_layer.allocation")
    if min(caps) == max(caps):
        label = f"{len(caps)} layers × {caps[0]} slots = {sum(caps)}"
    else:
        label = f"{len(caps)} layers, {min(caps)}–{max(caps)} slots, {sum(caps)} total"
    how = "" if alloc == "uniform" else f"; `{alloc}` rebalances from this start"
    rows = "\n".join(f"- layer {layer}: {c}" for layer, c in zip(shape.moe_layers, caps))
    return label, types.MarkupContent(
        kind=types.MarkupKind.Markdown,
        value=f"Per-layer capacities for `{shape.name}` ({len(caps)} MoE layers; uniform split{how}):\n\n{rows}")


def inlay_hints(ls, doc, rng: types.Range) -> list[types.InlayHint]:
    st = ls.settings
    if not (st.hint_defaults or st.hint_per_layer):
        return []
    idx = doc.index(ls.encoding)
    lo, hi = idx.offset(rng.start), idx.offset(rng.end)
    tree = analysis.document(ls.store, doc)
    braces = _Braces(doc.tokens)
    out: list[types.InlayHint] = []
    used: dict[int, int] = {}                 # characters of hints so far on each line

    def add(at: int, more: bool, label, kind, tooltip=None) -> None:
        pos = idx.position(at)
        text = label if isinstance(label, str) else "".join(p.value for p in label)
        used[pos.line] = used.get(pos.line, 0) + len(text)
        out.append(types.InlayHint(position=pos, label=label, kind=kind, tooltip=tooltip,
                                   padding_left=True, padding_right=more))

    for pol in tree.policies:
        ps, pe = idx.span_offsets(pol.span)
        if pol.name is None or pe < lo or ps > hi:
            continue
        ir = analysis.policy_ir(ls.store, doc, pol.name.text)
        for b in pol.blocks:
            if not isinstance(b, ast.Block) or not (lo <= idx.span_offsets(b.span)[0] <= hi):
                continue
            sb = schema.block(b.name.text)
            brace = braces.brace_after(idx.span_offsets(b.name.span)[1])
            if sb is None or brace is None:
                continue
            at, more = braces.anchor(brace)
            line = idx.position(at).line
            if st.hint_per_layer and b.name.text == "per_layer" and ir is not None and ls.store.model is not None:
                got = _per_layer_hint(ir.values, ls.store.model)
                if got is not None and used.get(line, 0) + len(got[0]) <= LINE_BUDGET:
                    add(at, more, got[0], types.InlayHintKind.Type, got[1])
            if st.hint_defaults and sb.params:
                entries = _default_entries(sb, b, ir)
                label = defaults_label(entries, LINE_BUDGET - used.get(line, 0)) if entries else None
                if label is not None:
                    add(at, more, label, types.InlayHintKind.Parameter)
    return out


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    @guarded(default=list)
    def hints(ls, params: types.InlayHintParams):
        doc = ls.store.get(params.text_document.uri)
        return [] if doc is None else inlay_hints(ls, doc, params.range)
