"""``weighted_sum(lru = a, lfu = b, ...)``: a memory tier's eviction rule that ranks victims by
the weighted sum of single-queue rules' normalised ranks (SPEC §12; docs/runtime.md,
"Memory tiers").

Every named rule keeps its own store over the same resident keys (each sees every hit,
miss, insert and discard). A key's rank under a rule is its place in that store's order,
coldest first (``keys()``), divided by ``n - 1`` for ``n`` residents (0 the coldest, 1 the
hottest); the victim is the evictable key with the lowest ``sum(weight x rank)``. Only the
weights' ratios matter. **Decision:** ties go to the key the first named rule ranks colder;
the rules' admission filters do not apply (``frequency_threshold`` contributes its ranking,
the lowest share first, not its filter). A victim search reads every rule's order:
O(rules x n log n), for the small caches of the tiers below the device's top one.

Imports only the store protocol and the basic rules (the registry, :mod:`mpl.runtime.eviction`,
builds it from a tier's rule).
"""

from __future__ import annotations

from mpl.runtime.eviction_basic import BASIC, Store


class WeightedSum(Store):
    """The weighted sum of the ranks of ``weights`` = ``((rule, weight), ...)``."""

    name = "weighted_sum"

    def __init__(self, weights, capacity: int, params):
        if len(weights) < 2:
            raise ValueError("weighted_sum needs at least two rules")
        parts = []
        for rule, w in weights:
            cls = BASIC.get(rule)
            if cls is None:
                raise ValueError(f"weighted_sum ranks by single-queue rules "
                                 f"({', '.join(BASIC)}), not {rule!r}")
            if not float(w) > 0:
                raise ValueError(f"weighted_sum: the weight of {rule} must be > 0, got {w!r}")
            parts.append((cls(capacity, params), float(w)))
        self.parts = parts
        self.weights = tuple((rule, float(w)) for rule, w in weights)
        self.needs_miss = any(s.needs_miss for s, _ in parts)
        self.capacity = capacity
        self.resident: dict = {}           # key -> None, in insertion order

    def __len__(self):
        return len(self.resident)

    def __contains__(self, key):
        return key in self.resident

    def hit(self, key, w):
        for s, _ in self.parts:
            s.hit(key, w)

    def miss(self, key, w):
        for s, _ in self.parts:
            if s.needs_miss:
                s.miss(key, w)

    def insert(self, key, w):
        self.resident[key] = None
        for s, _ in self.parts:
            s.insert(key, w)

    def discard(self, key):
        if self.resident.pop(key, 0) is None:
            for s, _ in self.parts:
                s.discard(key)

    def _scores(self) -> dict:
        """key -> (weighted rank sum, the first rule's rank)."""
        n = len(self.resident)
        norm = 1.0 / (n - 1) if n > 1 else 0.0
        score = dict.fromkeys(self.resident, 0.0)
        first = {}
        for j, (s, w) in enumerate(self.parts):
            for rank, key in enumerate(s.keys()):
                score[key] += w * rank * norm
                if j == 0:
                    first[key] = rank
        return {k: (v, first[k]) for k, v in score.items()}

    def evict(self, exclude, incoming=None):
        best = best_k = None
        for key, k in self._scores().items():
            if exclude and key in exclude:
                continue
            if best_k is None or k < best_k:
                best, best_k = key, k
        if best is not None:
            self.discard(best)
        return best

    def keys(self):
        scores = self._scores()
        return sorted(scores, key=scores.__getitem__)

    def resize(self, capacity: int) -> None:
        self.capacity = capacity
        for s, _ in self.parts:
            s.resize(capacity)

    def set_param(self, key: str, value) -> None:
        for s, _ in self.parts:
            s.set_param(key, value)

    def begin(self, step: int, layer: int) -> None:
        for s, _ in self.parts:
            s.begin(step, layer)
