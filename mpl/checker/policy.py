"""Checks of a resolved policy (``extends`` applied): required parts (MPL105), cross-field
and model-aware rules placed on the source, adapt semantics (MPL306, MPL308) and the
warnings that no original rule gives (MPL401, MPL403, MPL406)."""

from __future__ import annotations

from typing import Any

from mpl import schema
from mpl.checker import pins as PINS
from mpl.checker import tiers as T
from mpl.checker import values as V
from mpl.checker.common import INVALID, Sink, fmt_num, quote_list, remove_fix
from mpl.checker.crossfield import DEFAULTS, LIVE, ORDER, Violation, cross_field
from mpl.checker.resolved import ActionInfo, ResolvedPolicy, RuleInfo, action_has_effect
from mpl.diagnostics import Related, Severity
from mpl.rules import ADAPT_STATE_LIMIT, CODES
from mpl.rules.base import enables
from mpl.shapes import ModelShape
from mpl.syntax import ast


def effective_values(rp: ResolvedPolicy) -> dict[str, Any]:
    """Every schema key -> its IR value in this policy (INVALID where it had an error)."""
    out = dict(DEFAULTS)
    for key, s in rp.settings.items():
        out[key] = s.base
    return out


def _show(v) -> str:
    if isinstance(v, str):
        return v.replace("|", " | ")
    return schema.format_value(v) if not isinstance(v, float) else fmt_num(v)


def _name_span(rp: ResolvedPolicy):
    return rp.node.name.span if rp.node.name is not None else rp.node.span


def check_resolved(rp: ResolvedPolicy, sink: Sink, *, purpose: str = LIVE,
                   model: ModelShape | None = None) -> None:
    """Emit the policy-level diagnostics of ``rp`` (defined in ``sink``'s file)."""
    _required(rp, sink)
    values = effective_values(rp)
    given = set(rp.settings)
    blocks = set(rp.blocks)
    found = cross_field(values, blocks, given, purpose=purpose, model=model)
    rp.violations = frozenset(found)
    inherited = rp.parent_policy.violations if rp.parent_policy is not None else frozenset()
    for v in found:
        if v not in inherited:
            _place(rp, sink, v)
    T.check_resolved(rp, sink, model=model, values=values)
    PINS.check_resolved(rp, sink, model=model, values=values)
    rules = rp.all_rules()
    _adapt_semantics(rp, sink, values, blocks, given, rules, purpose, model, found)
    _no_effect(rp, sink, values, rules)
    _replaced(rp, sink, rules)
    _redundant_and_fighting(rp, sink, values, rules)


def _required(rp: ResolvedPolicy, sink: Sink) -> None:
    if rp.parent is not None and rp.parent_policy is None:
        return      # unknown or cyclic parent: reported there; its blocks are unknown
    if rp.syntax_damaged:
        return      # the parser could not read part of the policy: that error is reported
    if "cache" not in rp.blocks:
        if any(schema.BLOCKS[b].instead_of == "cache" for b in rp.blocks):
            return      # memory tiers instead of the cache
        sink.emit("MPL105", f"policy '{rp.name}' has no cache block; add 'cache {{ capacity = N }}'"
                  + (" or extend a policy that has one" if rp.parent is None else "")
                  + " (or memory tiers: 'hierarchy { ... }')", _name_span(rp))
        return
    for key in schema.missing_required(rp.settings.__contains__):   # what a policy must give
        p = schema.PARAMS[key]
        if rp.gives(key) or p.block not in rp.blocks:
            continue
        block = rp.blocks[p.block]
        if _misspelt(block, p.name):
            continue    # MPL102 already suggests the name
        span = block.name.span if p.block in rp.own_blocks else _name_span(rp)
        sink.emit("MPL105", f"the {p.block} of policy '{rp.name}' has no {p.name}; add "
                  f"{_required_hint(p)}", span)


def _required_hint(p: schema.Param) -> str:
    instead = f", or '{schema.PARAMS[p.instead].name} = ...'" if p.instead else ""
    if p.type == schema.SLOTS_OR_SIZE:
        hint = f"'{p.name} = N' (slots) or a size such as '{p.name} = 12GiB'{instead}"
    else:
        hint = f"'{p.name} = ...'{instead}"
    if p.replaced_by:
        other = schema.PARAMS[p.replaced_by]
        hint += f" (with a {other.block} block, '{other.name}' can give it instead)"
    return hint


def _misspelt(block: ast.Block, name: str) -> bool:
    """Whether ``block`` has an unknown parameter whose closest known name is ``name``."""
    from mpl.checker.common import suggest
    known = schema.BLOCKS[block.name.text].param_names()
    return any(isinstance(i, ast.Param) and i.name.text not in known
               and suggest(i.name.text, known) == name for i in block.items)


def _own(rp: ResolvedPolicy, key: str) -> bool:
    return key in rp.own_keys


def _related(rp: ResolvedPolicy, sink: Sink, keys, skip: str | None) -> tuple[Related, ...]:
    out = []
    for k in keys:
        s = rp.settings.get(k)
        if s is None or k == skip:
            continue
        where = "" if s.policy == rp.name else f" (inherited from '{s.policy}')"
        out.append(Related(f"{schema.PARAMS[k].name} is set here{where}", s.value_span,
                           file=s.file if s.file != sink.file else None))
    return tuple(out)


def _place(rp: ResolvedPolicy, sink: Sink, v: Violation) -> None:
    primary = next((k for k in v.keys if _own(rp, k)), None)
    if primary is not None:
        span = rp.settings[primary].value_span
        node = rp.settings[primary].node.value.value if rp.settings[primary].node.value else None
        if v.item is not None and isinstance(node, ast.ListValue) and v.item < len(node.items):
            span = node.items[v.item].span
    else:
        blk = next((schema.PARAMS[k].block for k in v.keys if schema.PARAMS[k].block in rp.own_blocks), None)
        span = rp.blocks[blk].name.span if blk is not None else _name_span(rp)
    sink.emit(v.code, v.message, span, related=_related(rp, sink, v.keys, primary))


def _is_error(v: Violation) -> bool:
    return CODES[v.code].severity is Severity.ERROR


def _own_rule(rp: ResolvedPolicy, r: RuleInfo) -> bool:
    return r.policy == rp.name and r.file == rp.file


#: above this many value-setting rules, pairs of rules are not checked (quadratic)
MAX_PAIR_RULES = 40
#: the states (combinations of adapt values) explored for sequences of three or more rules
MAX_ADAPT_STATES = ADAPT_STATE_LIMIT


def _set_actions(r: RuleInfo, per_layer: bool = True) -> list[ActionInfo]:
    """The value-setting actions of ``r`` that take effect (MPL308 / MPL408 ones do not)."""
    return [a for a in r.actions if a.kind == "set" and a.key is not None and a.value is not INVALID
            and action_has_effect(a, per_layer)]


def _new_errors(values, sets, blocks, given, purpose, model, known) -> list[Violation]:
    after = dict(values)
    for a in sets:
        after[a.key] = a.value
    given2 = given | {a.key for a in sets}
    return [v for v in cross_field(after, blocks, given2, purpose=purpose, model=model)
            if (v.code, v.keys) not in known and _is_error(v)]


#: the block of per-layer caches: `rebalance` and actions on its parameters need it (MPL308)
_PER_LAYER = schema.PER_LAYER_BLOCK


def _adapt_semantics(rp, sink, values, blocks, given, rules, purpose, model, base_found) -> None:
    """MPL308 (``rebalance`` or a per_layer.* action without per_layer) and MPL306: every
    rule's actions, applied to the policy as if it had fired, must keep it valid; and since a fired rule's values persist, so
    must every ordered pair of rules (the second one's actions applied after the first's)."""
    base = {(v.code, v.keys) for v in base_found}
    alone: dict[int, set] = {}
    candidates = []
    for i, r in enumerate(rules):
        if r.inverse:
            continue
        sets = _set_actions(r, _PER_LAYER in blocks)
        own = _own_rule(rp, r)
        if own and _PER_LAYER not in blocks:
            for a in r.actions:
                if a.kind == "rebalance" and a.value is not INVALID:
                    sink.emit("MPL308", f"'rebalance {a.name}' has no effect: it rebalances per-layer "
                              f"caches and the policy has one shared cache; add a 'per_layer {{ ... }}' "
                              f"block or remove this action", a.node.span,
                              fixes=(remove_fix(f"Remove 'rebalance {a.name}'", sink.text, a.node.span),))
                elif (a.kind == "set" and a.key is not None and a.value is not INVALID
                      and schema.PARAMS[a.key].block == _PER_LAYER):
                    sink.emit("MPL308", f"'{a.node.target.text} = {_show(a.value)}' sets a per-layer parameter, "
                              f"but the policy has one shared cache: it has no effect; add a "
                              f"'per_layer {{ ... }}' block or remove this action", a.node.span,
                              fixes=(remove_fix(f"Remove '{a.node.target.text} = {_show(a.value)}'",
                                                sink.text, a.node.span),))
        if not sets:
            continue
        candidates.append(i)
        found = _new_errors(values, sets, blocks, given, purpose, model, base)
        alone[i] = {(v.code, v.keys) for v in found}
        if not own:
            continue
        for v in found:
            hit = next((a for a in sets if a.key in v.keys), None)
            if hit is None:
                continue
            name = schema.PARAMS[hit.key].name
            sink.emit("MPL306", f"when this rule fires, '{name} = {_show(hit.value)}' makes the policy invalid: "
                      f"{v.message}", hit.value_span or hit.node.span,
                      related=_related(rp, sink, [k for k in v.keys if k != hit.key], None))
    if len(candidates) > MAX_PAIR_RULES:
        return
    known_pairs: set = set()
    reported: set = set()
    for x in candidates:
        for y in candidates:
            first, second = rules[x], rules[y]
            if x == y or first.node is second.node or not _own_rule(rp, second):
                continue
            known = base | alone[x] | alone[y]
            s1, s2 = _set_actions(first, _PER_LAYER in blocks), _set_actions(second, _PER_LAYER in blocks)
            for v in _new_errors(values, s1 + s2, blocks, given, purpose, model, known):
                hit = next((a for a in s2 if a.key in v.keys), None)
                other = next((a for a in s1 if a.key in v.keys and a.key != (hit.key if hit else None)), None)
                if hit is None or other is None:
                    continue
                known_pairs.add((v.code, v.keys))
                sig = (frozenset((x, y)), v.code, v.keys)
                if sig in reported:
                    continue
                reported.add(sig)
                name, oname = schema.PARAMS[hit.key].name, schema.PARAMS[other.key].name
                sink.emit("MPL306", f"when this rule fires after the one that sets '{oname} = {_show(other.value)}' "
                          f"(line {other.node.span.line}), '{name} = {_show(hit.value)}' makes the policy invalid: "
                          f"{v.message}", hit.value_span or hit.node.span,
                          related=(Related(f"the other rule sets {oname} = {_show(other.value)} here",
                                           other.value_span or other.node.span,
                                           file=first.file if first.file != sink.file else None),))
    known = set(base).union(*alone.values(), known_pairs)
    _sequences(rp, sink, values, blocks, given, rules, candidates, known, purpose, model)


def _sequences(rp, sink, values, blocks, given, rules, candidates, known, purpose, model) -> None:
    """MPL306 for sequences of three or more rules. Values persist, so after any firing
    sequence each parameter holds the value of the last rule that set it; a rule over k
    parameters can be broken by a combination only k rules make (prefetch budget, strategy
    and capacity from three different rules). The states reachable from the policy's values
    are explored breadth first (each is met through a shortest firing sequence), up to
    MAX_ADAPT_STATES states; a violation not already reported for the policy, a rule or a
    pair is reported once, on the last rule's action."""
    from collections import deque

    sets_of = {i: _set_actions(rules[i], _PER_LAYER in blocks) for i in candidates}
    adapt_keys = sorted({a.key for i in candidates for a in sets_of[i]})

    def state(vals) -> tuple:
        return tuple(repr(vals[k]) for k in adapt_keys)

    seen = {state(values)}
    queue = deque([(values, ())])
    done: set = set()
    while queue:
        vals, seq = queue.popleft()
        for i in candidates:
            new = dict(vals)
            for a in sets_of[i]:
                new[a.key] = a.value
            st = state(new)
            if st in seen:
                continue
            if len(seen) >= MAX_ADAPT_STATES:
                return
            seen.add(st)
            path = seq + (i,)
            queue.append((new, path))
            if len(path) < 3 or not _own_rule(rp, rules[i]):
                continue
            given2 = given | {a.key for j in path for a in sets_of[j]}
            for v in cross_field(new, blocks, given2, purpose=purpose, model=model):
                sig = (v.code, v.keys)
                if sig in known or sig in done or not _is_error(v):
                    continue
                hit = next((a for a in sets_of[i] if a.key in v.keys), None)
                if hit is None:
                    continue
                # the earlier rules whose values take part: the last setter of each key
                setters: dict = {}
                for j in path[:-1]:
                    for a in sets_of[j]:
                        if a.key in v.keys and a.key != hit.key:
                            setters[a.key] = (j, a)
                for a in sets_of[i]:
                    setters.pop(a.key, None)
                if len({j for j, _ in setters.values()}) < 2:
                    continue          # one earlier rule: a pair, already checked
                done.add(sig)
                earlier = sorted(setters.values(), key=lambda ja: path.index(ja[0]))
                name = schema.PARAMS[hit.key].name
                parts = [f"'{schema.PARAMS[a.key].name} = {_show(a.value)}' (line {a.node.span.line})"
                         for _, a in earlier]
                sink.emit("MPL306", f"when this rule fires after the rules that set "
                          f"{', '.join(parts[:-1])} and {parts[-1]}, '{name} = {_show(hit.value)}' "
                          f"makes the policy invalid: {v.message}", hit.value_span or hit.node.span,
                          related=tuple(Related(f"an earlier rule sets {schema.PARAMS[a.key].name} = "
                                                f"{_show(a.value)} here", a.value_span or a.node.span,
                                                file=rules[j].file if rules[j].file != sink.file else None)
                                        for j, a in earlier))


def _no_effect(rp: ResolvedPolicy, sink: Sink, values, rules) -> None:
    for key in sorted(rp.own_keys, key=ORDER.__getitem__):
        p = schema.PARAMS[key]
        if p.only_with is None:
            continue
        other, allowed = p.only_with
        possible = [values[other]] + [a.value for r in rules for a in r.actions
                                      if a.kind == "set" and a.key == other]
        verdicts = [enables(x, allowed) for x in possible]
        if any(v is None or v for v in verdicts):
            continue
        s = rp.settings[key]
        oname = schema.PARAMS[other].name
        cur = values[other]
        if schema.SET in allowed:
            msg = f"'{p.name}' has no effect without {oname}; remove it or set {oname}"
        else:
            msg = (f"'{p.name}' has no effect with {oname} = {_show(cur)}; remove it or set "
                   f"{oname} to {quote_list(allowed)}")
        sink.emit("MPL401", msg, s.node.name.span,
                  fixes=(remove_fix(f"Remove '{p.name}'", sink.text, s.node.span),))


def _replaced(rp: ResolvedPolicy, sink: Sink, rules: list[RuleInfo]) -> None:
    """MPL409: a parameter written beside the one that replaces it (``cache.capacity`` beside
    ``per_layer.total_budget``), and an adapt action setting it there: it has no effect."""
    for key in sorted(rp.own_keys, key=ORDER.__getitem__):
        p = schema.PARAMS[key]
        if p.replaced_by is None or p.replaced_by not in rp.settings:
            continue
        s, w = rp.settings[key], rp.settings[p.replaced_by]
        other = schema.PARAMS[p.replaced_by]
        sink.emit("MPL409", f"'{p.name}' has no effect: {other.block}.{other.name} = {_show(w.base)} decides "
                  f"every layer's capacity; remove {p.name} (or remove {other.name} to give every layer "
                  f"{p.name} = {_show(s.base)})", s.node.name.span,
                  related=_related(rp, sink, (p.replaced_by,), None),
                  fixes=(remove_fix(f"Remove '{p.name}'", sink.text, s.node.span),))
    for r in rules:
        if r.origin != "rule" or not _own_rule(rp, r):
            continue
        for a in r.actions:
            if a.kind != "set" or a.key not in schema.PARAMS:
                continue
            p = schema.PARAMS[a.key]
            if p.replaced_by is None or p.replaced_by not in rp.settings:
                continue
            w = rp.settings[p.replaced_by]
            other = schema.PARAMS[p.replaced_by]
            sink.emit("MPL409", f"this action has no effect: {other.block}.{other.name} = {_show(w.base)} "
                      f"decides every layer's capacity, not {p.name}; set {other.name} in the action "
                      f"instead", a.node.span, related=_related(rp, sink, (p.replaced_by,), None),
                      fixes=(remove_fix(f"Remove '{p.name} = {_show(a.value)}'", sink.text, a.node.span),)
                      if len(r.actions) > 1 else ())


def _redundant_and_fighting(rp: ResolvedPolicy, sink: Sink, values, rules: list[RuleInfo]) -> None:
    sets: list[tuple[int, RuleInfo, ActionInfo]] = []
    per_layer = _PER_LAYER in rp.blocks
    for i, r in enumerate(rules):
        for a in _set_actions(r, per_layer):
            sets.append((i, r, a))
    # MPL406 for a conditional value whose alternative is its value: `p = a : a when c`
    for r in rules:
        if r.origin != "conditional" or r.inverse or not _own_rule(rp, r):
            continue
        [a] = r.actions
        s = rp.settings.get(a.key)
        if s is not None and a.value is not INVALID and s.base is not INVALID and a.value == s.base:
            name = schema.PARAMS[a.key].name
            sink.emit("MPL406", f"the conditional value of '{name}' switches to {_show(a.value)}, which is already "
                      f"its value; drop ': {_show(a.value)} when ...' or choose another alternative",
                      a.value_span or a.node.span)
    # MPL406: an explicit rule sets the value already in force and nothing else changes it
    for i, r, a in sets:
        if r.origin != "rule" or not _own_rule(rp, r):
            continue
        cur = values.get(a.key)
        if cur is INVALID or a.value != cur:
            continue
        if any(b.key == a.key and b.value != a.value for _, _, b in sets):
            continue
        name = schema.PARAMS[a.key].name
        sink.emit("MPL406", f"'{name} = {_show(a.value)}' is already the value in force and no other rule "
                  f"changes it, so this action does nothing; remove it or set another value",
                  a.value_span or a.node.span,
                  fixes=(remove_fix(f"Remove '{name} = {_show(a.value)}'", sink.text, a.node.span),)
                  if len(r.actions) > 1 else ())
    # MPL403: two rules set one parameter to different values and can hold at once
    reported: set[int] = set()
    by_key: dict[str, list] = {}
    for item in sets:
        by_key.setdefault(item[2].key, []).append(item)
    for group in by_key.values():
        _fights(rp, sink, group, reported)


def _fights(rp: ResolvedPolicy, sink: Sink, sets: list, reported: set[int]) -> None:
    """MPL403 among the set actions of one parameter."""
    for x in range(len(sets)):
        i, r1, a1 = sets[x]
        for y in range(x + 1, len(sets)):
            j, r2, a2 = sets[y]
            if i == j or a1.value == a2.value or r1.node is r2.node:
                continue
            if not (_own_rule(rp, r1) or _own_rule(rp, r2)):
                continue
            if r1.condition is INVALID or r2.condition is INVALID:
                continue
            if not V.can_hold_together(r1.condition, r2.condition):
                continue
            later, earlier = (a2, a1) if _own_rule(rp, r2) else (a1, a2)
            lr, er = (r2, r1) if later is a2 else (r1, r2)
            if id(later) in reported:
                continue
            reported.add(id(later))
            name = schema.PARAMS[a1.key].name
            c1, c2 = er.condition, lr.condition
            sink.emit("MPL403", f"two adapt rules set '{name}' to different values ({_show(earlier.value)} and "
                      f"{_show(later.value)}) and their conditions '{c1.metric} {c1.op} {fmt_num(c1.threshold)}' "
                      f"and '{c2.metric} {c2.op} {fmt_num(c2.threshold)}' can hold at once; make the conditions "
                      f"exclusive or drop one action", later.value_span or later.node.span,
                      related=(Related(f"the other rule sets {name} = {_show(earlier.value)} here",
                                       earlier.value_span or earlier.node.span,
                                       file=er.file if er.file != sink.file else None),))
