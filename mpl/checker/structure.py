"""Schema checks of one policy's own text: blocks and parameters known and not repeated,
rules only in adapt, every value of the right type, enum, range and unit, and every adapt
action well-formed (MPL101-104, 113, 2xx, 404)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mpl import schema
from mpl.checker import pins as PINS
from mpl.checker import tiers as T
from mpl.checker import values as V
from mpl.checker.common import (INVALID, Sink, did_you_mean, quote_list, remove_fix,
                                replace_fix)
from mpl.checker.resolved import ActionInfo, RuleInfo, Setting
from mpl.diagnostics import Related
from mpl.syntax import ast


@dataclass
class OwnPart:
    """What one policy writes itself (before ``extends``)."""
    blocks: dict[str, ast.Block] = field(default_factory=dict)
    settings: dict[str, Setting] = field(default_factory=dict)
    rules: list[RuleInfo] = field(default_factory=list)
    tiers: T.OwnTiers = field(default_factory=T.OwnTiers)       # hierarchy, per_layer_hierarchy
    pins: PINS.OwnPins = field(default_factory=PINS.OwnPins)    # the cache's `pin layers = ...` items


_PARAMS = {(p.block, p.name): p for p in schema.PARAMS.values()}
_KEYS = {id(p): p.key for p in schema.PARAMS.values()}


def _block_of(name: str) -> str | None:
    for b in schema.BLOCKS.values():
        if b.param(name) is not None:
            return b.name
    return None


def check_policy_body(policy: ast.Policy, pname: str, sink: Sink) -> OwnPart:
    own = OwnPart()
    for b in policy.blocks:
        if not isinstance(b, ast.Block) or b.name is None:
            continue
        name = b.name.text
        sb = schema.BLOCKS.get(name)
        if sb is None:
            _unknown_block(sink, b)
            continue
        first = own.blocks.get(name)
        if first is not None:
            sink.emit("MPL103", f"block '{name}' appears twice in policy '{pname}'; merge its "
                      f"parameters into the first one and remove this one", b.name.span,
                      related=(Related(f"first '{name}' block here", first.name.span),),
                      fixes=(remove_fix(f"Remove the duplicate '{name}' block", sink.text, b.span),))
        else:
            own.blocks[name] = b
        if not sb.flat:
            # a duplicate block's items are checked, and not used
            T.check_own(sink, b, sb, pname, own.tiers if first is None else T.OwnTiers())
            continue
        for item in b.items:
            if isinstance(item, ast.Section):
                if item.kind.text in sb.sections and item.kind.text == PINS.SPEC.kind:
                    # (a duplicate block's items are checked, and not used)
                    PINS.check_item(sink, item, b, pname, own.pins if first is None else PINS.OwnPins())
                else:
                    T.misplaced(sink, item, name, sb.sections)
            elif isinstance(item, ast.Param):
                _param(sink, sb, item, b, pname, own)
            elif isinstance(item, ast.Rule):
                if not sb.rules:
                    when = sink.span(item.span.offset, min(item.span.offset + 4, item.span.end_offset))
                    sink.emit("MPL113", f"'when' rules belong in the adapt block, not in '{name}'; "
                              f"move this rule into 'adapt {{ ... }}'", when)
                    continue
                own.rules.append(check_rule(sink, item, pname))
    PINS.finish_own(sink, own.pins)
    return own


def _unknown_block(sink: Sink, b: ast.Block) -> None:
    name = b.name.text
    tail, s = did_you_mean(name, schema.BLOCKS)
    fixes = (replace_fix(f"Replace '{name}' with '{s}'", b.name.span, s),) if s else ()
    if not tail:
        tail = "; blocks are " + quote_list(schema.BLOCKS)
    sink.emit("MPL101", f"unknown block '{name}'{tail}", b.name.span, fixes=fixes)


def _param(sink: Sink, sb: schema.Block, item: ast.Param, b: ast.Block, pname: str, own: OwnPart) -> None:
    name = item.name.text
    if sb.rules:
        p = schema.PARAMS.get(schema.ADAPT_TARGETS.get(name, ""), None)
        hint = (f"set it in '{p.block}' or write 'when METRIC OP NUMBER {{ {name} = ... }}'" if p
                else "write 'when METRIC OP NUMBER { NAME = value }'")
        sink.emit("MPL113", f"the adapt block holds rules, not parameters; {hint}", item.name.span)
        return
    p = _PARAMS.get((sb.name, name))
    if p is None:
        tail, s = did_you_mean(name, sb.param_names())
        other = _block_of(name)
        fixes = (replace_fix(f"Replace '{name}' with '{s}'", item.name.span, s),) if s else ()
        if other is not None and not s:
            tail = f"; '{name}' belongs in the '{other}' block"
        elif not tail:
            tail = "; parameters of " + sb.name + ": " + ", ".join(sb.param_names())
        sink.emit("MPL102", f"unknown parameter '{name}' in {sb.name}{tail}", item.name.span, fixes=fixes)
        return
    base, alt, cond = V.check_expr(sink, p, item.value)
    key = _KEYS[id(p)]
    first = own.settings.get(key)
    if first is not None:
        sink.emit("MPL104", f"'{name}' is set twice in {sb.name}; the first value is used; remove this one",
                  item.name.span, related=(Related("first set here", first.node.name.span),),
                  fixes=(remove_fix(f"Remove the duplicate '{name}'", sink.text, item.span),))
        return
    own.settings[key] = Setting(key, item, b, sink.file, pname, base, alt, cond)


def resolve_target(sink: Sink | None, target: ast.Name):
    """Adapt-action target -> schema key, or INVALID (MPL207 / MPL404 reported)."""
    text = target.text
    key = schema.ADAPT_TARGETS.get(text)
    if key is not None:
        p = schema.PARAMS[key]
        if text in p.aliases and sink is not None:
            sink.emit("MPL404", f"'{text}' is the original's name for '{p.name}'; write '{p.name}'",
                      target.span, fixes=(replace_fix(f"Replace '{text}' with '{p.name}'", target.span, p.name),))
        return key
    p = schema.PARAMS.get(text)
    if p is None:
        owner = _block_of(text)
        if owner is not None:
            p = schema.PARAMS[f"{owner}.{text}"]
    if sink is None:
        return INVALID
    if p is not None:
        adaptable = sorted(q.name for q in schema.PARAMS.values() if q.adaptable)
        sink.emit("MPL207", f"'{p.name}' cannot be changed by an adapt rule: it is fixed for the run; "
                  f"adaptable parameters: {', '.join(adaptable)}", target.span)
        return INVALID
    cands = [k for k in schema.ADAPT_TARGETS if "." in text or "." not in k]
    tail, s = did_you_mean(text, cands)
    fixes = (replace_fix(f"Replace '{text}' with '{s}'", target.span, s),) if s else ()
    if not tail:
        tail = "; an action sets an adaptable parameter, e.g. 'eviction = lru'"
    sink.emit("MPL207", f"unknown adapt target '{text}'{tail}", target.span, fixes=fixes)
    return INVALID


def check_action(sink: Sink, a) -> ActionInfo | None:
    if isinstance(a, ast.SetAction):
        key = resolve_target(sink, a.target)
        if key is INVALID:
            return ActionInfo(a, "set", None, INVALID, value_span=a.span)
        p = schema.PARAMS[key]
        val = V.check_value(p, a.value, sink)
        if p.adapt_no_effect and val is not INVALID:
            sink.emit("MPL408", f"'{a.target.text} = {V.describe(a.value)}' has no effect: "
                      f"{p.adapt_no_effect}; remove this action or set '{p.name}' in '{p.block}'",
                      a.span, fixes=(remove_fix(f"Remove '{a.target.text} = {V.describe(a.value)}'",
                                                sink.text, a.span),))
        return ActionInfo(a, "set", key, val, value_span=a.value.span if a.value is not None else a.span)
    if isinstance(a, ast.TriggerAction):
        if a.name is None:
            return ActionInfo(a, "trigger", value=INVALID)
        n = a.name.text
        if n not in schema.TRIGGERS:
            tail, s = did_you_mean(n, schema.TRIGGERS)
            fixes = (replace_fix(f"Replace '{n}' with '{s}'", a.name.span, s),) if s else ()
            sink.emit("MPL207", f"unknown trigger '{n}'{tail or '; triggers are ' + quote_list(schema.TRIGGERS)}",
                      a.name.span, fixes=fixes)
            return ActionInfo(a, "trigger", value=INVALID)
        return ActionInfo(a, "trigger", name=n, value=n)
    if isinstance(a, ast.RebalanceAction):
        if a.name is None:
            return ActionInfo(a, "rebalance", value=INVALID)
        n = a.name.text
        p = schema.PARAMS[schema.REBALANCE]
        if p.enum_value(n) is None:
            tail, s = did_you_mean(n, p.enum_names())
            fixes = (replace_fix(f"Replace '{n}' with '{s}'", a.name.span, s),) if s else ()
            sink.emit("MPL207", f"cannot rebalance by '{n}'{tail or '; use ' + quote_list(p.enum_names())}",
                      a.name.span, fixes=fixes)
            return ActionInfo(a, "rebalance", value=INVALID)
        return ActionInfo(a, "rebalance", name=n, value=n)
    return None


def check_rule(sink: Sink, rule: ast.Rule, pname: str) -> RuleInfo:
    cond = V.check_condition(sink, rule.condition)
    dur = V.check_duration(sink, rule.duration)
    info = RuleInfo(rule, sink.file, pname, cond, dur)
    for a in rule.actions:
        act = check_action(sink, a)
        if act is not None:
            info.actions.append(act)
    return info
