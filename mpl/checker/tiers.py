"""Memory tiers (SPEC §12): the ``hierarchy`` and ``per_layer_hierarchy`` blocks.

Three steps, as for the flat blocks:

* :func:`check_own` checks what one policy writes (its items, parameters and values:
  MPL102, 104, 113, 115-119, 2xx) and returns an :class:`OwnTiers`;
* :func:`inherit` applies ``extends`` (and a band over the hierarchy, the same way): a tier
  is overridden by name, parameter by parameter, keeping its place; a tier with a new name
  goes right after the tier written before it (first: on top); a transition is overridden by
  its event and tiers; a band by its layers;
* :func:`check_resolved` checks the resulting tiers of a policy (MPL120, MPL3xx, the hints
  and warnings MPL42x and, with a model, MPL5xx), each violation placed on this policy's
  own text (an inherited one only when the parent did not have it), and :func:`lower` turns
  them into the IR's :class:`mpl.ir.Hierarchy` and :class:`mpl.ir.Band`.

The rules' explanations live with the other rules of their groups (:mod:`mpl.rules`); the
checks are here because they need the tiers' structure, not only a policy's values.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from mpl import ir, schema
from mpl.checker import values as V
from mpl.checker.common import INVALID, Sink, did_you_mean, quote_list, remove_fix, replace_fix
from mpl.checker.resolved import Setting
from mpl.diagnostics import Related, Span
from mpl.syntax import ast

_LOCATION_RANK = {"gpu": 0, "cpu": 1, "disk": 2}
_DTYPE_BITS = {d.name: d.bits for d in schema.DTYPES.values()}


# ---------------------------------------------------------------- what a policy writes
@dataclass
class TierInfo:
    """A tier as written (``settings`` by parameter name); after ``extends`` it may merge
    the settings of several ``tier`` items (``nodes``, the last one this policy's or the
    nearest ancestor's)."""
    name: str
    node: ast.Section
    file: str | None
    policy: str
    settings: dict[str, Setting] = field(default_factory=dict)
    nodes: tuple = ()

    def get(self, name: str, default=None):
        s = self.settings.get(name)
        return default if s is None else s.base


@dataclass
class EdgeInfo:
    """A transition as written: ``on EVENT(SOURCE -> TARGET) { ... }``."""
    event: str
    source: ast.Name
    target: ast.Name
    node: ast.Section
    file: str | None
    policy: str
    settings: dict[str, Setting] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.event, self.source.text, self.target.text)

    @property
    def text(self) -> str:
        return f"{self.event}({self.source.text} -> {self.target.text})"


@dataclass
class Level:
    """A set of tiers: a ``hierarchy`` block or a ``band``."""
    kind: str                          # "hierarchy" | "band"
    node: Any                          # ast.Block | ast.Section
    file: str | None
    policy: str
    block: ast.Block                   # the block it is written in (for Setting.block)
    tiers: list[TierInfo] = field(default_factory=list)
    edges: list[EdgeInfo] = field(default_factory=list)
    settings: dict[str, Setting] = field(default_factory=dict)    # by parameter name
    layers: Any = None                 # a band's ir.Layers (INVALID on errors)
    layers_node: Any = None            # a band's `layers = ...` head (ast.Param)
    damaged: bool = False              # an item of it could not be read (reported already)

    def tier(self, name: str) -> TierInfo | None:
        for t in self.tiers:
            if t.name == name:
                return t
        return None

    @property
    def name_span(self) -> Span:
        if isinstance(self.node, ast.Block):
            return self.node.name.span
        return self.layers_node.span if self.layers_node is not None else self.node.kind.span


@dataclass
class OwnTiers:
    """The memory-tier blocks of one policy (its own, or resolved through ``extends``)."""
    hierarchy: Level | None = None
    bands: list[Level] = field(default_factory=list)
    bands_block: ast.Block | None = None      # the per_layer_hierarchy block
    bands_file: str | None = None             # ... its file and the policy that wrote it
    bands_policy: str | None = None

    @property
    def present(self) -> bool:
        return self.hierarchy is not None or self.bands_block is not None


# ---------------------------------------------------------------- own text
def check_own(sink: Sink, block: ast.Block, spec: schema.Block, pname: str, own: OwnTiers) -> None:
    """Check a ``hierarchy`` or ``per_layer_hierarchy`` block of one policy into ``own``."""
    if spec.sections == ("band",):
        if own.bands_block is None:
            own.bands_block, own.bands_file, own.bands_policy = block, sink.file, pname
        items = [i for i in block.items if not isinstance(i, ast.Section) or i.kind.text != "band"]
        _check_items(sink, spec, block.name.text, items, block, pname, None)
        seen: dict = {}
        for sec in block.sections:
            if sec.kind.text != "band":
                continue
            if not _head_ok(sink, sec, schema.SECTIONS["band"]):
                continue
            band = _level(sink, "band", sec, sec.items, block, pname)
            band.layers_node = sec.head
            band.layers = _band_layers(sink, sec.head)
            if band.layers is not INVALID and band.layers in seen:
                first = seen[band.layers]
                sink.emit("MPL116", f"band {band.layers} appears twice in per_layer_hierarchy; "
                          f"merge its items into the first one and remove this one",
                          sec.head.span, related=(Related(f"first band {band.layers} here",
                                                          first.layers_node.span),),
                          fixes=(remove_fix(f"Remove the second band {band.layers}", sink.text, sec.span),))
                continue
            if band.layers is not INVALID:
                seen[band.layers] = band
            own.bands.append(band)
        if not block.sections and not _syntax_damaged(block):
            sink.emit("MPL118", "per_layer_hierarchy has no band; add 'band layers = FIRST..LAST "
                      "{ tier NAME { ... } }' for the layers, or remove the block", block.name.span)
        return
    level = _level(sink, "hierarchy", block, block.items, block, pname)
    if own.hierarchy is None:
        own.hierarchy = level


def _syntax_damaged(node) -> bool:
    return any(isinstance(x, ast.ErrorNode) for x in ast.walk(node)) or not getattr(node, "closed", True)


def _band_layers(sink: Sink, head: ast.Param) -> Any:
    spec = schema.SECTIONS["band"].selector
    if head.name.text != spec.name:
        tail, s = did_you_mean(head.name.text, (spec.name,))
        fixes = (replace_fix(f"Replace '{head.name.text}' with '{s}'", head.name.span, s),) if s else ()
        sink.emit("MPL102", f"unknown parameter '{head.name.text}' in a band's head"
                  f"{tail or '; write band ' + spec.name + ' = FIRST..LAST'}", head.name.span, fixes=fixes)
        return INVALID
    base, _, _ = V.check_expr(sink, spec, head.value)
    return base


def _head_ok(sink: Sink, sec: ast.Section, spec: schema.Section) -> bool:
    """Whether the section's head has the form of its kind (MPL115 otherwise)."""
    head = sec.head
    if head is None:
        return False                      # a syntax error, reported by the parser
    form = {schema.LABEL: ast.Name, schema.SELECTOR: ast.Param, schema.EDGE: ast.Edge}[spec.head]
    if isinstance(head, form):
        if isinstance(head, ast.Edge):
            return head.event is not None and head.source is not None and head.target is not None
        if isinstance(head, ast.Param):
            return head.value is not None
        return True
    article = "an" if spec.kind[0] in "aeiou" else "a"
    sink.emit("MPL115", f"{article} {spec.kind} is written '{spec.syntax}'", head.span)
    return False


def _level(sink: Sink, kind: str, node, items, block: ast.Block, pname: str) -> Level:
    level = Level(kind, node, sink.file, pname, block)
    spec = schema.container(kind if kind == "hierarchy" else "band")
    where = "hierarchy" if kind == "hierarchy" else "a band"
    rest = _check_items(sink, spec, kind, items, block, pname, level)
    level.damaged = (len(rest) < sum(isinstance(i, ast.Section) for i in items)
                     or any(isinstance(i, ast.ErrorNode) for i in items)
                     or not getattr(node, "closed", True))
    for sec in rest:
        k = sec.kind.text
        if k == "tier":
            if not _head_ok(sink, sec, schema.SECTIONS["tier"]):
                level.damaged = True
                continue
            tier = _tier(sink, sec, block, pname)
            first = level.tier(tier.name)
            if first is not None:
                sink.emit("MPL116", f"tier '{tier.name}' appears twice in {where}; merge its "
                          f"parameters into the first one and remove this one", sec.head.span,
                          related=(Related(f"first tier '{tier.name}' here", first.node.head.span),),
                          fixes=(remove_fix(f"Remove the second tier '{tier.name}'", sink.text, sec.span),))
                continue
            level.tiers.append(tier)
        elif k == "on":
            if not _head_ok(sink, sec, schema.SECTIONS["on"]):
                level.damaged = True
                continue
            edge = _edge(sink, sec, block, pname)
            if edge is None:
                continue
            first = next((e for e in level.edges if e.key == edge.key), None)
            if first is not None:
                sink.emit("MPL117", f"transition '{edge.text}' appears twice in {where}; merge "
                          f"its parameters into the first one and remove this one", sec.head.span,
                          related=(Related("first written here", first.node.head.span),),
                          fixes=(remove_fix(f"Remove the second '{edge.text}'", sink.text, sec.span),))
                continue
            level.edges.append(edge)
    return level


def _check_items(sink: Sink, spec, owner: str, items, block: ast.Block, pname: str,
                 level: Level | None) -> list[ast.Section]:
    """The parameters (into ``level.settings``) and misplaced items of a block or section;
    returns the sections of the kinds it holds."""
    out = []
    for item in items:
        if isinstance(item, ast.Param):
            s = _param(sink, spec, owner, item, block, pname, level.settings if level else {})
            if s is not None and level is not None:
                level.settings[item.name.text] = s
        elif isinstance(item, ast.Rule):
            when = sink.span(item.span.offset, min(item.span.offset + 4, item.span.end_offset))
            sink.emit("MPL113", f"'when' rules belong in the adapt block, not in '{owner}'; "
                      f"move this rule into 'adapt {{ ... }}'", when)
        elif isinstance(item, ast.Section):
            if item.kind.text in spec.sections:
                out.append(item)
            else:
                misplaced(sink, item, owner, spec.sections)
    return out


def misplaced(sink: Sink, sec: ast.Section, owner: str, allowed: tuple[str, ...]) -> None:
    """MPL115: a section of an unknown kind, or one that does not belong where it is."""
    kind = sec.kind.text
    spec = schema.SECTIONS.get(kind)
    if spec is not None:
        inside = " or ".join(f"'{p}'" for p in spec.parents)
        sink.emit("MPL115", f"'{kind}' items belong in {inside}, not in '{owner}'", sec.kind.span)
        return
    tail, s = did_you_mean(kind, allowed) if allowed else ("", None)
    fixes = (replace_fix(f"Replace '{kind}' with '{s}'", sec.kind.span, s),) if s else ()
    if not tail:
        tail = (f"; '{owner}' holds " + quote_list(f"'{schema.SECTIONS[a].syntax}'" for a in allowed)
                if allowed else f"; '{owner}' holds no nested items")
    sink.emit("MPL115", f"unknown item '{kind}' in '{owner}'{tail}", sec.kind.span, fixes=fixes)


def _param(sink: Sink, spec, owner: str, item: ast.Param, block: ast.Block, pname: str,
           settings: dict) -> Setting | None:
    name = item.name.text
    p = spec.param(name)
    if p is None:
        tail, s = did_you_mean(name, spec.param_names())
        fixes = (replace_fix(f"Replace '{name}' with '{s}'", item.name.span, s),) if s else ()
        if not tail:
            names = spec.param_names()
            tail = (f"; parameters of {owner}: " + ", ".join(names)) if names else \
                f"; '{owner}' has no parameters of its own"
        sink.emit("MPL102", f"unknown parameter '{name}' in {owner}{tail}", item.name.span, fixes=fixes)
        return None
    base, alt, cond = V.check_expr(sink, p, item.value)
    first = settings.get(name)
    if first is not None:
        sink.emit("MPL104", f"'{name}' is set twice in {owner}; the first value is used; remove this one",
                  item.name.span, related=(Related("first set here", first.node.name.span),),
                  fixes=(remove_fix(f"Remove the duplicate '{name}'", sink.text, item.span),))
        return None
    if p.type == schema.ENUM_LIST and p.name == "dtype_ladder" and base is not INVALID:
        base = _ladder_order(sink, item, base)
    return Setting(p.key, item, block, sink.file, pname, base, alt, cond)


def _ladder_order(sink: Sink, item: ast.Param, ladder: tuple) -> Any:
    """MPL213: a dtype ladder goes from the highest precision to the lowest, each lower."""
    bits = [_DTYPE_BITS[d] for d in ladder]
    if all(a > b for a, b in zip(bits, bits[1:])):
        return ladder
    node = item.value.value
    same = next(((a, b) for a, b in zip(ladder, ladder[1:]) if _DTYPE_BITS[a] == _DTYPE_BITS[b]), None)
    if same is not None:
        sink.emit("MPL213", f"dtype_ladder holds {same[0]} and {same[1]}, which have the same "
                  f"precision ({_DTYPE_BITS[same[0]]} bits): each rung must be lower than the one "
                  f"before it; keep one of them", node.span)
        return INVALID
    fixed = "[" + ", ".join(sorted(ladder, key=lambda d: -_DTYPE_BITS[d])) + "]"
    sink.emit("MPL213", f"dtype_ladder goes from the highest precision to the lowest; write {fixed}",
              node.span, fixes=(replace_fix(f"Write {fixed}", node.span, fixed),))
    return INVALID


def _tier(sink: Sink, sec: ast.Section, block: ast.Block, pname: str) -> TierInfo:
    tier = TierInfo(sec.head.text, sec, sink.file, pname, nodes=(sec,))
    spec = schema.SECTIONS["tier"]
    for item in sec.items:
        if isinstance(item, ast.Param):
            s = _param(sink, spec, f"tier '{tier.name}'", item, block, pname, tier.settings)
            if s is not None:
                tier.settings[item.name.text] = s
        elif isinstance(item, ast.Rule):
            when = sink.span(item.span.offset, min(item.span.offset + 4, item.span.end_offset))
            sink.emit("MPL113", "'when' rules belong in the adapt block, not in a tier; "
                      "move this rule into 'adapt { ... }'", when)
        elif isinstance(item, ast.Section):
            misplaced(sink, item, f"tier {tier.name}", ())
    return tier


def _edge(sink: Sink, sec: ast.Section, block: ast.Block, pname: str) -> EdgeInfo | None:
    spec = schema.SECTIONS["on"]
    head: ast.Edge = sec.head
    event = head.event.text
    if spec.event(event) is None:
        names = tuple(e.name for e in spec.events)
        tail, s = did_you_mean(event, names)
        fixes = (replace_fix(f"Replace '{event}' with '{s}'", head.event.span, s),) if s else ()
        sink.emit("MPL212", f"unknown transition '{event}'{tail or '; a transition is ' + quote_list(names)}",
                  head.event.span, fixes=fixes)
        return None
    edge = EdgeInfo(event, head.source, head.target, sec, sink.file, pname)
    for item in sec.items:
        if isinstance(item, ast.Param):
            s = _param(sink, spec, f"on {edge.text}", item, block, pname, edge.settings)
            if s is not None:
                edge.settings[item.name.text] = s
        elif isinstance(item, ast.Rule):
            when = sink.span(item.span.offset, min(item.span.offset + 4, item.span.end_offset))
            sink.emit("MPL113", "'when' rules belong in the adapt block, not in a transition; "
                      "move this rule into 'adapt { ... }'", when)
        elif isinstance(item, ast.Section):
            misplaced(sink, item, f"on {edge.text}", ())
    return edge


# ---------------------------------------------------------------- extends
def _merge_tier(a: TierInfo, b: TierInfo) -> TierInfo:
    return TierInfo(b.name, b.node, b.file, b.policy, {**a.settings, **b.settings},
                    a.nodes + b.nodes)


def merge_level(base: Level, over: Level) -> Level:
    """``over`` applied to ``base``: tiers by name (a new one right after the tier written
    before it, or on top), transitions by event and tiers, parameters by name."""
    tiers = list(base.tiers)
    anchor = -1
    for t in over.tiers:
        at = next((i for i, x in enumerate(tiers) if x.name == t.name), None)
        if at is None:
            anchor += 1
            tiers.insert(anchor, t)
        else:
            tiers[at] = _merge_tier(tiers[at], t)
            anchor = at
    edges = list(base.edges)
    for e in over.edges:
        at = next((i for i, x in enumerate(edges) if x.key == e.key), None)
        if at is None:
            edges.append(e)
        else:
            old = edges[at]
            edges[at] = replace(e, settings={**old.settings, **e.settings})
    return Level(over.kind, over.node, over.file, over.policy, over.block, tiers, edges,
                 {**base.settings, **over.settings}, over.layers, over.layers_node,
                 base.damaged or over.damaged)


def inherit(parent: OwnTiers, own: OwnTiers) -> OwnTiers:
    """The tiers of a policy that extends ``parent`` and writes ``own``."""
    out = OwnTiers(parent.hierarchy, list(parent.bands), parent.bands_block, parent.bands_file,
                   parent.bands_policy)
    if own.hierarchy is not None:
        out.hierarchy = own.hierarchy if parent.hierarchy is None else merge_level(parent.hierarchy, own.hierarchy)
    if own.bands_block is not None:
        out.bands_block, out.bands_file, out.bands_policy = own.bands_block, own.bands_file, own.bands_policy
    for band in own.bands:
        at = next((i for i, b in enumerate(out.bands)
                   if band.layers is not INVALID and b.layers == band.layers), None)
        if at is None:
            out.bands.append(band)
        else:
            out.bands[at] = merge_level(out.bands[at], band)
    return out


def effective_levels(t: OwnTiers) -> list[Level]:
    """The hierarchy and every band with the hierarchy under it, as they take effect."""
    out = []
    if t.hierarchy is not None:
        out.append(t.hierarchy)
    for band in t.bands:
        out.append(merge_level(t.hierarchy, band) if t.hierarchy is not None else band)
    return out


# ---------------------------------------------------------------- checks of a resolved policy
@dataclass
class _Found:
    code: str
    message: str
    node: Any                 # the AST node it is placed on (with its file and policy)
    file: str | None
    policy: str
    span: Span
    fixes: tuple = ()
    related: tuple = ()

    @property
    def key(self):
        return (self.code, self.message)


def _loc(t: TierInfo):
    loc = t.get("location")
    return loc if isinstance(loc, ir.Location) else None


def _slots(t: TierInfo, model) -> int | None:
    """A tier's capacity in slots (a size needs the model's expert size)."""
    cap = t.get("capacity")
    if cap is None or cap is INVALID:
        return None
    if isinstance(cap, ir.Size):
        if model is None:
            return None
        return int(cap.bytes // _expert_bytes(t, model))
    return int(cap)


def _stored_bits(model) -> int:
    return model.bytes_per_param * 8


def _expert_bytes(t: TierInfo, model) -> float:
    """Bytes of one expert at the tier's precision (the checkpoint's own when not given)."""
    d = _dtype(t)
    bits = _DTYPE_BITS[d] if d is not None else _stored_bits(model)
    return model.expert_bytes * bits / _stored_bits(model)


def _dtype(t: TierInfo) -> str | None:
    d = t.get("dtype")
    if isinstance(d, str):
        return d
    ladder = t.get("dtype_ladder")
    if isinstance(ladder, tuple) and ladder:
        return ladder[0]
    return None


class _Checker:
    """The checks of one policy's resolved tiers; every violation is collected, then placed."""

    def __init__(self, rp, tiers: OwnTiers, model, values) -> None:
        self.rp = rp
        self.tiers = tiers
        self.model = model
        self.values = values
        self.found: list[_Found] = []

    def add(self, code, message, node, file, policy, span, fixes=(), related=()) -> None:
        self.found.append(_Found(code, message, node, file, policy, span, tuple(fixes), tuple(related)))

    def on_tier(self, code, message, t: TierInfo, span=None, fixes=(), name: str | None = None) -> None:
        """A violation about tier ``t`` (at the setting ``name`` when it is written)."""
        s = t.settings.get(name) if name else None
        if s is not None:
            self.add(code, message, s.node, s.file, s.policy, span or s.value_span, fixes)
        else:
            self.add(code, message, t.node, t.file, t.policy, span or t.node.head.span, fixes)

    # -- one set of tiers
    def level(self, lv: Level) -> None:
        where = "the hierarchy" if lv.kind == "hierarchy" else f"band {lv.layers}"
        if not lv.tiers:
            if lv.damaged:
                return          # what could not be read was reported
            if lv.kind == "hierarchy" or self.tiers.hierarchy is None:
                self.add("MPL118", f"{where} has no tier; add 'tier NAME {{ location = gpu  "
                         f"capacity = N }}'", lv.node, lv.file, lv.policy, lv.name_span)
            return
        tiers = lv.tiers
        disk = [t for t in tiers if _loc(t) is not None and _loc(t).kind == "disk"]
        last = tiers[-1]
        for t in tiers:
            if "location" not in t.settings:
                self.on_tier("MPL120", f"tier '{t.name}' has no location; add 'location = gpu' "
                             f"(or gpu:N, cpu, disk)", t)
        # order: gpu, then cpu, then disk (at most one, the last)
        for d in disk[1:]:
            self.on_tier("MPL321", f"tier '{d.name}' is a second disk tier (tier '{disk[0].name}' "
                         f"is the first): a hierarchy has at most one disk tier, the last, which "
                         f"holds every expert; remove one", d, name="location")
        for prev, t in zip(tiers, tiers[1:]):
            a, b = _loc(prev), _loc(t)
            if a is None or b is None:
                continue
            if a.kind == "disk" and b.kind == "disk":
                continue
            if _LOCATION_RANK[b.kind] < _LOCATION_RANK[a.kind]:
                if a.kind == "disk":
                    msg = (f"tier '{t.name}' ({b}) comes after the disk tier '{prev.name}': the "
                           f"disk tier holds every expert and is the last; move tier '{t.name}' "
                           f"above it")
                else:
                    msg = (f"tier '{t.name}' ({b}) comes after tier '{prev.name}' ({a}): tiers "
                           f"are ordered fastest first: gpu, then cpu, then disk")
                self.on_tier("MPL322", msg, t, name="location")
        if disk and not any(_loc(t) is not None and _loc(t).kind == "cpu" for t in tiers):
            d = disk[0]
            self.on_tier("MPL327", f"the disk tier '{d.name}' is read into host memory first, but "
                         f"{where} has no cpu tier; add 'tier NAME {{ location = cpu  capacity = "
                         f"SIZE }}' above it", d, name="location")
        for i, t in enumerate(tiers):
            loc = _loc(t)
            if loc is None:
                continue
            # the last tier holds every expert (written tiers ending on a GPU have host
            # memory below them)
            is_last = t is last and loc.kind in ("cpu", "disk")
            cap_given = "capacity" in t.settings
            if loc.kind == "gpu" and not cap_given:
                self.on_tier("MPL120", f"tier '{t.name}' has no capacity: a gpu tier holds "
                             f"'capacity = N' slots or a size such as 'capacity = 12GiB'", t)
            elif loc.kind == "cpu" and not is_last and not cap_given:
                below = tiers[i + 1].name
                self.on_tier("MPL120", f"tier '{t.name}' has no capacity: with tier '{below}' "
                             f"below it, host memory is a cache; add 'capacity = SIZE' (or N slots)", t)
            if loc.kind == "disk" and cap_given:
                s = t.settings["capacity"]
                self.add("MPL421", f"'capacity' has no effect on the disk tier '{t.name}': it holds "
                         f"every expert; remove it", s.node, s.file, s.policy, s.node.name.span,
                         fixes=(remove_fix("Remove 'capacity'", self._text(s), s.node.span),))
            if loc.kind != "disk" and "path" in t.settings:
                s = t.settings["path"]
                self.add("MPL421", f"'path' has no effect on tier '{t.name}' ({loc}): it names "
                         f"where a disk tier's files are; remove it", s.node, s.file, s.policy,
                         s.node.name.span, fixes=(remove_fix("Remove 'path'", self._text(s), s.node.span),))
            if "eviction" in t.settings and (is_last or t.get("residency") == "always"):
                s = t.settings["eviction"]
                why = ("it is the last tier and holds every expert" if is_last
                       else "its residency is always: nothing is evicted from it")
                self.add("MPL421", f"'eviction' has no effect on tier '{t.name}': {why}; remove it",
                         s.node, s.file, s.policy, s.node.name.span,
                         fixes=(remove_fix("Remove 'eviction'", self._text(s), s.node.span),))
            d, ladder = t.get("dtype"), t.get("dtype_ladder")
            if isinstance(d, str) and isinstance(ladder, tuple) and ladder and ladder[0] != d:
                self.on_tier("MPL326", f"tier '{t.name}' has dtype {d} and a dtype_ladder that starts "
                             f"at {ladder[0]}: the ladder's first rung is the tier's precision; "
                             f"remove dtype or start the ladder at {d}", t, name="dtype")
        self.edges(lv, where)
        self.hint_precision(lv)
        if self.model is not None:
            self.model_level(lv, where)

    def _text(self, s: Setting) -> str:
        return self.rp.text if s.file == self.rp.file else _file_text(self.rp, s)

    def edges(self, lv: Level, where: str) -> None:
        names = [t.name for t in lv.tiers]
        for e in lv.edges:
            ok = True
            for end in (e.source, e.target):
                if end.text not in names:
                    tail, s = did_you_mean(end.text, names)
                    fixes = (replace_fix(f"Replace '{end.text}' with '{s}'", end.span, s),) if s else ()
                    self.add("MPL119", f"unknown tier '{end.text}' in '{e.text}'"
                             f"{tail or '; the tiers of ' + where + ' are ' + quote_list(names)}",
                             e.node, e.file, e.policy, end.span, fixes)
                    ok = False
            if not ok:
                continue
            i, j = names.index(e.source.text), names.index(e.target.text)
            up, down = e.event == "promote", e.event == "demote"
            step = j - i
            head = e.node.head
            if step == 0:
                self.add("MPL320", f"'{e.text}' moves a key from tier '{e.source.text}' to itself; "
                         f"a transition joins two adjacent tiers", e.node, e.file, e.policy, head.span)
                continue
            if (down and step < 0) or (up and step > 0):
                other = "promote" if down else "demote"
                self.add("MPL320", f"'{e.text}' goes {'up' if down else 'down'}: a {e.event[:-1]}ion "
                         f"moves a key {'down to the tier below' if down else 'up to the tier above'}; "
                         f"did you mean {other}({e.source.text} -> {e.target.text})?",
                         e.node, e.file, e.policy, head.span,
                         fixes=(replace_fix(f"Replace '{e.event}' with '{other}'", head.event.span, other),))
                continue
            if abs(step) > 1:
                nxt = names[i + (1 if step > 0 else -1)]
                skipped = names[min(i, j) + 1:max(i, j)]
                self.add("MPL320", f"'{e.text}' skips tier{'s' if len(skipped) > 1 else ''} "
                         f"{quote_list(repr(n) for n in skipped)}: a transition joins two adjacent "
                         f"tiers; write {e.event}({e.source.text} -> {nxt})", e.node, e.file, e.policy,
                         head.span, fixes=(replace_fix(f"Replace '{e.target.text}' with '{nxt}'",
                                                       e.target.span, nxt),))
                continue
            self.mechanism(lv, e)
            if down and "trigger_threshold" in e.settings:
                s = e.settings["trigger_threshold"]
                self.add("MPL421", f"'trigger_threshold' has no effect on a demotion: it admits "
                         f"promoted keys into the tier above; remove it or put it on "
                         f"promote({e.target.text} -> {e.source.text})", s.node, s.file, s.policy,
                         s.node.name.span, fixes=(remove_fix("Remove 'trigger_threshold'",
                                                             self._text(s), s.node.span),))

    def mechanism(self, lv: Level, e: EdgeInfo) -> None:
        s = e.settings.get("mechanism")
        if s is None or s.base != "in_place_requant":
            return
        src, dst = lv.tier(e.source.text), lv.tier(e.target.text)
        fix = (replace_fix("Replace with copy", s.value_span, "copy"),)
        if e.event == "promote":
            self.add("MPL323", "in_place_requant quantizes a key where it is, to a lower precision: "
                     "a promotion cannot do that; use mechanism = copy", s.node, s.file, s.policy,
                     s.value_span, fix)
            return
        a, b = _loc(src), _loc(dst)
        if a is not None and b is not None and a != b:
            self.add("MPL323", f"in_place_requant quantizes a key where it is, but tier "
                     f"'{src.name}' is on {a} and tier '{dst.name}' on {b}; use mechanism = copy "
                     f"(or put both tiers on one device)", s.node, s.file, s.policy, s.value_span, fix)
            return
        da, db = _dtype(src), _dtype(dst)
        if not self._lower_precision(da, db):
            what_a = da or "the checkpoint's precision"
            what_b = db or "the checkpoint's precision"
            self.add("MPL323", f"in_place_requant quantizes to a lower precision, but tier "
                     f"'{dst.name}' holds {what_b}, not lower than tier '{src.name}' ({what_a}); "
                     f"give '{dst.name}' a lower dtype (int8, int4) or use mechanism = copy",
                     s.node, s.file, s.policy, s.value_span, fix)

    def _lower_precision(self, upper: str | None, lower: str | None) -> bool:
        """Whether ``lower`` may be a lower precision than ``upper`` (None: the checkpoint's
        own; unknown without a model, so only a sure 'not lower' is False)."""
        stored = _stored_bits(self.model) if self.model is not None else None
        a = _DTYPE_BITS[upper] if upper is not None else stored
        b = _DTYPE_BITS[lower] if lower is not None else stored
        if lower is None and upper is None:
            return False
        if a is None:               # upper at the checkpoint's precision, no model
            return lower != "fp32"
        if b is None:               # lower at the checkpoint's precision, no model
            return False
        return b < a

    def hint_precision(self, lv: Level) -> None:
        """MPL420 on every tier whose precision is below the checkpoint's."""
        stored = _stored_bits(self.model) if self.model is not None else None
        for t in lv.tiers:
            rungs = []
            d, ladder = t.get("dtype"), t.get("dtype_ladder")
            if isinstance(ladder, tuple):
                rungs = list(ladder)
            if isinstance(d, str) and d not in rungs:
                rungs.insert(0, d)
            low = [r for r in rungs if (stored is not None and _DTYPE_BITS[r] < stored)
                   or (stored is None and not schema.DTYPES[r].stored)]
            if not low:
                continue
            if stored is None:
                below = "below any checkpoint's own precision"
            else:
                below = f"below the checkpoint's precision ({stored}-bit)"
            held = (f"at {low[0]}" if len(low) == 1 else f"at {quote_list(low)}")
            self.add("MPL420", f"tier '{t.name}' holds experts {held}, {below}: what it serves is "
                     f"computed from a lower-precision copy, approximately (the statistics count "
                     f"those accesses); promote to a tier at the checkpoint's precision where the "
                     f"output must not change", t.node, t.file, t.policy, t.node.head.span)

    # -- with a model
    def model_level(self, lv: Level, where: str) -> None:
        m = self.model
        tiers = lv.tiers
        if lv.kind == "band" and lv.layers is not INVALID and lv.layers is not None:
            layers = [x for x in m.moe_layers if x in lv.layers]
            where = f"{m.name} in band {lv.layers}"
        else:
            layers = list(m.moe_layers)
            where = m.name
        every = len(layers) * m.num_experts
        for i, t in enumerate(tiers):
            cap = t.get("capacity")
            if isinstance(cap, ir.Size):
                eb = _expert_bytes(t, m)
                if cap.bytes < eb:
                    self.on_tier("MPL519", f"tier '{t.name}': capacity {_size_text(cap.bytes)} is smaller "
                                 f"than one expert of {m.name} at {_dtype(t) or 'its precision'} "
                                 f"({_size_text(eb)}): it gives no slot; write at least "
                                 f"{_size_text(eb)} or a slot count", t, name="capacity")
                    continue
            slots = _slots(t, m)
            if slots is None:
                continue
            loc = _loc(t)
            is_last = t is tiers[-1] and loc is not None and loc.kind in ("cpu", "disk")
            if not is_last and every and slots >= every and loc is not None and loc.kind != "disk":
                self.on_tier("MPL517", f"tier '{t.name}' holds {slots} slots, every one of the {every} "
                             f"experts of {where}: the tiers below it are never used; "
                             f"lower its capacity or remove the tiers below it", t, name="capacity")
            if is_last and loc is not None and loc.kind == "cpu" and every and slots < every:
                self.on_tier("MPL518", f"tier '{t.name}' is the last tier, which holds every expert, "
                             f"but its capacity gives {slots} of the {every} experts of {where}; "
                             f"raise it, remove it, or add a disk tier below it",
                             t, name="capacity")
            if i == 0 and loc is not None and loc.kind == "gpu" and slots < m.top_k:
                self.on_tier("MPL520", f"the top tier '{t.name}' holds {slots} slot"
                             f"{'' if slots == 1 else 's'}, below {m.name}'s top-k of {m.top_k}: "
                             f"every dispatch streams at least {m.top_k - slots} expert"
                             f"{'' if m.top_k - slots == 1 else 's'}; raise its "
                             f"capacity to {m.top_k} or more", t, name="capacity")

    def device_memory(self) -> None:
        """MPL516: the gpu tiers of every level in force, per device, above its memory."""
        m = self.model
        if m is None or not m.device_memory_bytes:
            return
        t = self.tiers
        levels = effective_levels(t)
        if t.hierarchy is not None and t.bands:
            covered = {x for b in t.bands if isinstance(b.layers, ir.Layers)
                       for x in m.moe_layers if x in b.layers}
            if covered >= set(m.moe_layers):
                levels = levels[1:]      # every layer is in a band: the hierarchy is not used
        per_device: dict = {}
        for lv in levels:
            for tier in lv.tiers:
                loc, slots = _loc(tier), _slots(tier, m)
                if loc is None or loc.kind != "gpu" or slots is None:
                    continue
                per_device.setdefault(loc.index, []).append(slots * _expert_bytes(tier, m))
        dev = m.device_memory_bytes
        if t.bands_block is not None and t.bands:
            at = (t.bands_block, t.bands_file, t.bands_policy, t.bands_block.name.span)
        elif t.hierarchy is not None:
            h = t.hierarchy
            at = (h.node, h.file, h.policy, h.name_span)
        else:
            return
        for index, parts in per_device.items():
            need = sum(parts)
            if need > dev:
                name = "the device" if index is None else f"device gpu:{index}"
                self.add("MPL516", f"the gpu tiers on {name} need {need / 1e9:.1f} GB of experts, more "
                         f"than its memory ({dev / 1e9:.1f} GB); lower their capacities", *at)

    def bands(self) -> None:
        """MPL324 (overlap), MPL325 (a gap between bands) and, with a model, MPL515."""
        t = self.tiers
        bands = sorted((b for b in t.bands if isinstance(b.layers, ir.Layers)),
                       key=lambda b: (b.layers.first, b.layers.last))
        for a, b in zip(bands, bands[1:]):
            if b.layers.first <= a.layers.last:
                lo, hi = b.layers.first, min(a.layers.last, b.layers.last)
                both = f"layer {lo}" if lo == hi else f"layers {lo}..{hi}"
                self.add("MPL324", f"band {b.layers} overlaps band {a.layers} ({both} in both): "
                         f"every layer is in at most one band", b.node, b.file, b.policy,
                         b.layers_node.span,
                         related=(Related(f"band {a.layers} here", a.layers_node.span,
                                          file=a.file if a.file != b.file else None),))
            elif b.layers.first > a.layers.last + 1 and t.hierarchy is None:
                lo, hi = a.layers.last + 1, b.layers.first - 1
                gap = f"layer {lo} is" if lo == hi else f"layers {lo}..{hi} are"
                self.add("MPL325", f"{gap} in no band (between band {a.layers} and band {b.layers}): "
                         f"without a hierarchy block every MoE layer needs a band; extend a band or "
                         f"add 'band layers = {lo}..{hi} {{ ... }}'", b.node, b.file, b.policy,
                         b.layers_node.span)
        m = self.model
        if m is None or not bands:
            return
        for b in bands:
            if b.layers.last >= m.num_layers:
                self.add("MPL515", f"band {b.layers} names layers {m.name} does not have (its layers "
                         f"are 0..{m.num_layers - 1})", b.node, b.file, b.policy, b.layers_node.span)
        if t.hierarchy is None:
            missing = [x for x in m.moe_layers if not any(x in b.layers for b in bands)]
            if missing:
                node = t.bands_block
                self.add("MPL515", f"MoE layer{'s' if len(missing) > 1 else ''} {_runs(missing)} of "
                         f"{m.name} {'are' if len(missing) > 1 else 'is'} in no band: every MoE layer "
                         f"needs one (or add a hierarchy block for the layers outside the bands)",
                         node, t.bands_file, t.bands_policy, node.name.span)

    def run(self) -> list[_Found]:
        t = self.tiers
        if t.hierarchy is not None:
            self.level(t.hierarchy)
        for lv in effective_levels(t)[1 if t.hierarchy is not None else 0:]:
            self.level(lv)
        self.bands()
        self.device_memory()
        self.prefetch_budget()
        return self.found

    def prefetch_budget(self) -> None:
        """MPL328: prefetches load into the top tier: the budget must fit in it."""
        strategy = self.values.get("prefetch.strategy")
        budget = self.values.get("prefetch.budget")
        if strategy in (None, "none", INVALID) or not isinstance(budget, int):
            return
        s = self.rp.settings.get("prefetch.budget")
        for lv in effective_levels(self.tiers):
            if not lv.tiers:
                continue
            top = lv.tiers[0]
            slots = _slots(top, self.model)
            if slots is None or budget <= slots:
                continue
            note = "" if s is not None else " (the default)"
            msg = (f"prefetch budget {budget}{note} exceeds the {slots} slots of the top tier "
                   f"'{top.name}', which prefetches load into; set budget to at most {slots}")
            if s is not None:
                self.add("MPL328", msg, s.node, s.file, s.policy, s.value_span)
            else:
                self.on_tier("MPL328", msg, top, name="capacity")
            return


def _runs(xs: list[int]) -> str:
    out, start = [], None
    for i, x in enumerate(xs):
        if start is None:
            start = x
        if i + 1 == len(xs) or xs[i + 1] != x + 1:
            out.append(str(start) if start == x else f"{start}..{x}")
            start = None
    return ", ".join(out)


def _size_text(b: float) -> str:
    for unit in ("GiB", "MiB"):
        f = schema.UNITS[unit].factor
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{int(b)} bytes"


def _file_text(rp, s: Setting) -> str:
    """The text of the file a setting is written in (an import's, reached through the
    resolved parents)."""
    p = rp
    while p is not None:
        if p.file == s.file:
            return p.text
        p = p.parent_policy
    return ""


def check_resolved(rp, sink: Sink, *, model=None, values=None) -> None:
    """The memory-tier diagnostics of a resolved policy ``rp`` (defined in ``sink``'s file)."""
    t: OwnTiers = rp.tiers
    _blocks(rp, sink)
    if not t.present:
        rp.tier_violations = frozenset()
        return
    found = _Checker(rp, t, model, values or {}).run()
    rp.tier_violations = frozenset(f.key for f in found)
    inherited = rp.parent_policy.tier_violations if rp.parent_policy is not None else frozenset()
    seen = set()
    for f in found:
        own = f.policy == rp.name and f.file == rp.file
        key = (f.code, f.span.offset, f.message) if own else f.key
        if key in seen:
            continue
        seen.add(key)
        if own:
            sink.emit(f.code, f.message, f.span, fixes=f.fixes, related=f.related)
        elif f.key not in inherited:
            # made wrong by what this policy changes: said here, pointing at the inherited part
            at = _own_anchor(rp)
            sink.emit(f.code, f.message, at,
                      related=(Related(f"inherited from '{f.policy}'", f.span,
                                       file=f.file if f.file != sink.file else None), *f.related))


def _own_anchor(rp) -> Span:
    for name in ("hierarchy", "per_layer_hierarchy"):
        if name in rp.own_blocks:
            return rp.blocks[name].name.span
    return rp.node.name.span if rp.node.name is not None else rp.node.span


def _blocks(rp, sink: Sink) -> None:
    """MPL114 (blocks that exclude each other), MPL329 (capacity and capacity_factor) and
    MPL422 (adapt actions on the cache in a policy without one)."""
    reported = set()
    for name in rp.blocks:
        spec = schema.BLOCKS[name]
        for other in spec.excludes:
            if other not in rp.blocks or (name, other) in reported:
                continue
            reported.add((name, other))
            mine = [b for b in (name, other) if b in rp.own_blocks]
            if not mine:
                continue                       # both inherited: reported in the parent
            at = rp.blocks[mine[-1]]
            first = rp.blocks[other if mine[-1] == name else name]
            other_name = first.name.text
            if "cache" in (name, other):
                why = "the hierarchy's tiers replace the cache (its top tier is the device cache)"
            else:
                why = "per_layer splits the cache block's capacity; give a band of layers its own tiers instead"
            sink.emit("MPL114", f"a policy has '{at.name.text}' or '{other_name}', not both: {why}; "
                      f"remove one of them", at.name.span,
                      related=(Related(f"'{other_name}' here", first.name.span,
                                       file=rp.block_files.get(first.name.text) if rp.block_files.get(first.name.text) != sink.file else None),))
    cap, factor = rp.settings.get("cache.capacity"), rp.settings.get("cache.capacity_factor")
    if cap is not None and factor is not None and ("cache.capacity" in rp.own_keys
                                                   or "cache.capacity_factor" in rp.own_keys):
        later = factor if "cache.capacity_factor" in rp.own_keys else cap
        other = cap if later is factor else factor
        sink.emit("MPL329", "the cache sets both capacity and capacity_factor: they are two ways "
                  "to give its size; keep one", later.node.name.span,
                  related=(Related(f"{schema.PARAMS[other.key].name} is set here", other.value_span,
                                   file=other.file if other.file != sink.file else None),),
                  fixes=(remove_fix(f"Remove '{schema.PARAMS[later.key].name}'", rp.text, later.node.span),)
                  if later.file == sink.file else ())
    if "cache" not in rp.blocks and rp.tiers.present:
        for r in rp.rules:
            if r.policy != rp.name or r.file != rp.file:
                continue
            for a in r.actions:
                if a.kind == "set" and a.key is not None and a.value is not INVALID \
                        and schema.PARAMS[a.key].block == "cache":
                    sink.emit("MPL422", f"'{a.node.target.text}' sets a cache parameter, but the policy "
                              f"has memory tiers instead of a cache block: it has no effect; remove "
                              f"this action", a.node.span,
                              fixes=(remove_fix(f"Remove '{a.node.target.text}'", rp.text, a.node.span),))


# ---------------------------------------------------------------- lowering
def _lower_tier(t: TierInfo, defaults, last: bool) -> ir.Tier:
    def val(name):
        s = t.settings.get(name)
        if s is not None:
            return s.base
        return defaults.get(f"tier.{name}")
    ladder = val("dtype_ladder") or ()
    dtype = val("dtype")
    if dtype is None and ladder:
        dtype = ladder[0]
    residency = val("residency")
    eviction = None if last or residency == "always" else val("eviction")
    return ir.Tier(t.name, val("location"), dtype, tuple(ladder), None if last and _loc(t).kind == "disk"
                   else val("capacity"), residency, eviction, val("path"),
                   source_line=t.node.span.line)


def _lower_level(lv: Level) -> ir.Hierarchy:
    level_key = "hierarchy" if lv.kind == "hierarchy" else "band"
    level_eviction = (lv.settings["eviction"].base if "eviction" in lv.settings
                      else schema.NESTED_PARAMS[f"{level_key}.eviction"].default)
    split = (lv.settings["granularity_split"].base if "granularity_split" in lv.settings
             else schema.NESTED_PARAMS[f"{level_key}.granularity_split"].default)
    defaults = {k: (None if p.default in (schema.OFF, schema.DERIVED, schema.REQUIRED) else p.default)
                for k, p in schema.NESTED_PARAMS.items()}
    defaults["tier.eviction"] = level_eviction
    tiers = []
    for i, t in enumerate(lv.tiers):
        loc = _loc(t)
        last = i == len(lv.tiers) - 1 and loc.kind in ("cpu", "disk")
        tiers.append(_lower_tier(t, defaults, last))
    if _loc(lv.tiers[-1]).kind == "gpu":
        tiers.append(ir.Tier(ir.HOST_TIER, ir.Location("cpu"), None, (), None,
                             defaults["tier.residency"], None, None, implicit=True))
    written = {e.key: e for e in lv.edges}
    transitions = []
    for upper, lower in zip(tiers, tiers[1:]):
        for event, src, dst in (("demote", upper, lower), ("promote", lower, upper)):
            e = written.get((event, src.name, dst.name))
            got = {n: s.base for n, s in (e.settings.items() if e is not None else ())}
            transitions.append(ir.Transition(
                event, src.name, dst.name,
                got.get("mechanism", defaults["on.mechanism"]),
                got.get("trigger_threshold", defaults["on.trigger_threshold"])))
    return ir.Hierarchy(tuple(tiers), tuple(transitions), level_eviction, split,
                        source_line=lv.node.span.line)


def lower(t: OwnTiers) -> tuple[ir.Hierarchy | None, tuple[ir.Band, ...]]:
    """The IR of a checked policy's tiers: (hierarchy, bands sorted by their first layer)."""
    hierarchy = _lower_level(t.hierarchy) if t.hierarchy is not None else None
    bands = []
    for lv in effective_levels(t)[1 if t.hierarchy is not None else 0:]:
        bands.append(ir.Band(lv.layers, _lower_level(lv), source_line=lv.node.span.line))
    bands.sort(key=lambda b: (b.layers.first, b.layers.last))
    return hierarchy, tuple(bands)


def broken_part(t: OwnTiers) -> str | None:
    """What of the tiers cannot be lowered (a value with an error, a band without valid
    layers, a tier without a location), else None."""
    for lv in effective_levels(t):
        if lv.kind == "band" and not isinstance(lv.layers, ir.Layers):
            return "a band's layers"
        if not lv.tiers:
            return "a set of tiers without a tier"
        for s in lv.settings.values():
            if s.base is INVALID or s.base is None:
                return s.key
        for tier in lv.tiers:
            if _loc(tier) is None:
                return f"tier '{tier.name}' (no location)"
            for s in tier.settings.values():
                if s.base is INVALID or s.base is None:
                    return s.key
        for e in lv.edges:
            for s in e.settings.values():
                if s.base is INVALID or s.base is None:
                    return s.key
    return None


__all__ = ["EdgeInfo", "Level", "OwnTiers", "TierInfo", "broken_part", "check_own",
           "check_resolved", "effective_levels", "inherit", "lower", "merge_level", "misplaced"]
