"""Random policy texts drawn from the schema: every block, parameter, nested item (tiers,
transitions, bands, pins) and adapt action the language has, with values in and out of range,
units, fallbacks and conditional values, laid out as a user writes them. One seed, one text
(``Texts(random.Random(seed)).policy()``); the property tests of both backends, of live
attach and of vLLM's live offload draw from it."""

from __future__ import annotations

import random

from mpl import schema

#: the blocks one of which holds the device cache (a policy has one of them)
CACHE_BLOCKS = ("cache", "hierarchy", "per_layer_hierarchy")
NESTED = schema.NESTED_PARAMS
METRICS = list(schema.METRICS)


class Texts:
    """A random policy text of the schema's blocks, parameters and items (``r``: its seed's
    random source)."""

    def __init__(self, r: random.Random):
        self.r = r
        self.flat_params = False     # the block's own parameters are drawn already

    def number(self, p) -> str:
        r = self.r
        if r.random() < 0.05:                     # out of range, or at an edge
            return r.choice(["-1", "0", "0.0", "1e9", "1e300"])
        lo = p.min if p.min is not None else 0
        hi = p.max if p.max is not None else 100
        if p.type in ("count", "int", "slots_or_size", "layer_range"):
            first = int(lo) if lo == int(lo) else int(lo) + 1
            return str(r.randint(first, int(min(hi, first + r.choice([3, 10, 100, 1000])))))
        return repr(round(lo + (min(hi, lo + 10) - lo) * r.random(), r.choice([1, 2, 3])))

    def value(self, p) -> str:
        r, t = self.r, p.type
        if t == "enum":
            v = r.choice([e.name for e in p.enum])
            segments = [e.name for e in p.enum if e.segment]
            if p.fallback and r.random() < 0.2:
                v = f"{r.choice(segments)} | {r.choice(segments)}"
            if p.weighted and r.random() < 0.3:     # single-queue rules, now and then any
                pool = [e.name for e in p.enum] if r.random() < 0.1 else segments
                rules = r.sample(pool, min(len(pool), r.choice([1, 2, 2, 2, 2, 3, 3])))
                v = "weighted_sum(" + ", ".join(f"{x} = {r.choice(['0.2', '0.5', '0.7', '1'])}"
                                                for x in rules) + ")"
            return v
        if t == "bool":
            return r.choice(["true", "false"])
        if t in ("number", "count", "int"):
            s = self.number(p)
            return s + (" " + r.choice(p.units) if p.units and r.random() < 0.3 else "")
        if t == "slots_or_size":
            if r.random() < 0.3:
                return f"{r.choice([1, 2, 4, 64, 512])}{r.choice(['MB', 'MiB', 'GiB'])}"
            return str(r.randint(1, r.choice([3, 4, 6, 8, 16, 64])))    # small ones evict
        if t == "int_list":
            return "[" + ", ".join(str(r.randint(0, 12)) for _ in range(r.randint(0, 3))) + "]"
        if t == "metric_list":
            return "[" + ", ".join(r.sample(METRICS, r.randint(1, 3))) + "]"
        if t == "enum_list":                       # (a ladder: highest first, now and then not)
            rungs = r.sample([e.name for e in p.enum], r.randint(1, 3))
            if r.random() < 0.9 and all(x in schema.DTYPES for x in rungs):
                rungs.sort(key=lambda x: -schema.DTYPES[x].bits)
            return "[" + ", ".join(rungs) + "]"
        if t == "layer_range":
            a = r.randint(0, 5)
            return f"{a}..{a + r.randint(0, 5)}" if r.random() < 0.8 else str(a)
        if t == "location":
            return r.choice(["gpu", "gpu", "cpu", "disk", "gpu:1"])
        if t == "string":
            return '"/tmp/mpl-experts"'
        raise AssertionError(f"a parameter type the generator does not draw: {t}")

    def condition(self) -> str:
        r = self.r
        return (f"{r.choice(METRICS)} {r.choice(sorted(schema.COMPARISON_OPS))} "
                f"{r.choice(['0', '0.1', '0.5', '0.9', '1', '2'])}")

    def param(self, p, name=None) -> str:
        v = self.value(p)
        if p.conditional and self.r.random() < 0.15:
            v = f"{v} : {self.value(p)} when {self.condition()}"
        return f"{name or p.name} = {v}"

    def tiers(self) -> list[str]:
        r = self.r
        out, names = [], []
        # gpu tiers, then host memory, then a disk (in that order, now and then not)
        locs = ["gpu"] * r.randint(1, 3) + r.choice([[], ["cpu"], ["cpu", "disk"], ["cpu", "disk"]])
        if r.random() < 0.05:
            r.shuffle(locs)
        for i, loc in enumerate(locs):
            name = f"t{i}"
            items = [f"location = {loc}"]
            if loc == "gpu" or (loc == "cpu" and "disk" in locs) or r.random() < 0.1:
                items.append(self.param(NESTED["tier.capacity"], "capacity"))
            for key, chance in (("tier.dtype", 0.2), ("tier.dtype_ladder", 0.1),
                                ("tier.residency", 0.1), ("tier.eviction", 0.2)):
                if r.random() < chance:
                    items.append(self.param(NESTED[key], key.split(".")[1]))
            out.append(f"tier {name} {{ " + "  ".join(items) + " }")
            names.append(name)
        edges = set()
        for _ in range(r.randint(0, 2)):
            if len(names) < 2:
                break
            i = r.randrange(len(names) - 1)
            event = r.choice(["promote", "demote"])
            if (i, event) in edges:
                continue
            edges.add((i, event))
            a, b = (names[i], names[i + 1]) if event == "demote" else (names[i + 1], names[i])
            body = r.choice(["", "mechanism = copy", "mechanism = copy",
                             self.param(NESTED["on.mechanism"], "mechanism"),
                             self.param(NESTED["on.trigger_threshold"], "trigger_threshold")])
            out.append(f"on {event}({a} -> {b}) {{ {body} }}")
        for key in ("hierarchy.granularity_split", "hierarchy.eviction"):
            if r.random() < 0.3 and not self.flat_params:
                out.append(self.param(NESTED[key], key.split(".")[1]))
        return out

    def block(self, b) -> str:
        r = self.r
        drawn = r.sample(list(b.params), r.randint(0, min(len(b.params), 4)))
        lines = [self.param(p) for p in drawn]
        if r.random() < 0.9:               # capacity or capacity_factor, rarely both
            named = {line.split(" ")[0] for line in lines}
            instead = {p.instead.split(".")[1] for p in b.params
                       if p.instead and p.name in named}
            lines = [line for line in lines if line.split(" ")[0] not in instead]
        required = [p for p in b.params if p.default is schema.REQUIRED]
        for p in required:
            named = {line.split(" ")[0] for line in lines}
            alternative = p.instead and p.instead.split(".")[1] in named
            if p.name not in named and not alternative and r.random() < 0.9:
                lines.insert(0, self.param(p))
        if "pin" in b.sections and r.random() < 0.1:
            lines.append(f"pin layers = {self.value(NESTED['pin.layers'])} "
                         f"{{ experts = {self.value(NESTED['pin.experts'])} }}")
        self.flat_params = bool(lines) and "tier" in b.sections
        if "tier" in b.sections:
            lines += self.tiers()
        self.flat_params = False
        if "band" in b.sections:
            first = 0
            for _ in range(r.randint(1, 3)):
                n = r.randint(0, 3)
                tiers = "  ".join(self.tiers())
                lines.append(f"band layers = {first}..{first + n} {{ {tiers} }}")
                first += n + 1
        if b.rules:
            for _ in range(r.randint(1, 3)):
                lines.append(self.rule())
        return f"    {b.name} {{\n        " + "\n        ".join(lines) + "\n    }"

    def rule(self) -> str:
        r = self.r
        actions = []
        for _ in range(r.randint(1, 2)):
            c = r.random()
            if c < 0.15:
                actions.append(f"trigger {r.choice(sorted(schema.TRIGGERS))}")
            elif c < 0.25:
                key = schema.REBALANCE
                actions.append(f"rebalance {self.value(schema.PARAMS[key])}")
            else:                   # an adaptable parameter, of the device cache's block often
                adaptable = sorted(k for k in schema.ADAPT_TARGETS if "." in k)
                pool = (sorted(schema.PARAMS) if r.random() < 0.05 else
                        [k for k in adaptable if k.startswith("cache.")] if r.random() < 0.4 else
                        adaptable)
                key = r.choice(pool)
                actions.append(f"{key} = {self.value(schema.PARAMS[key])}")
        lasting = (f" for {r.randint(1, 50)} {r.choice(schema.RULE_DURATION_UNITS)}"
                   if r.random() < 0.5 else "")
        return f"when {self.condition()}{lasting} {{ " + "  ".join(actions) + " }"

    def policy(self) -> str:
        r = self.r
        first = r.choice(["cache", "cache", "hierarchy", "per_layer_hierarchy"])
        # (per_layer beside memory tiers is an error: now and then)
        chance = {b: 0.03 if first != "cache" and b == schema.PER_LAYER_BLOCK else 0.35
                  for b in schema.BLOCKS}
        chosen = [schema.BLOCKS[first]] + [
            b for b in schema.BLOCKS.values()
            if b.name not in CACHE_BLOCKS and r.random() < chance[b.name]]
        if first != "cache" and r.random() < 0.03:
            chosen.append(schema.BLOCKS["cache"])
        return "policy p {\n" + "\n".join(self.block(b) for b in chosen) + "\n}\n"
