"""Memory-tier texts shared by the checker's and the language server's tests: the original's
examples (its README's hierarchy example and SPEC section 12's) and malformed variants of them
(a Hypothesis strategy: deletions, insertions of tier pieces, duplications, cuts)."""

import os

from hypothesis import strategies as st

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "tiers.moe")

#: the original README's hierarchy example (two device tiers, one of them int4, an in-place demotion)
README_EXAMPLE = """policy tiers {
  hierarchy {
    tier T0_gpu_hot   { dtype = fp16  location = gpu  capacity = 16 }
    tier T1_gpu_warm  { dtype = int4  location = gpu  capacity = 32 }
    on demote(T0_gpu_hot -> T1_gpu_warm) { mechanism = in_place_requant }
    eviction = lru
  }
}
"""

SPEC_EXAMPLE = """policy big {
    hierarchy {
        tier hot  { location = gpu   dtype = fp16  capacity = 16 }
        tier warm { location = gpu   dtype = int4  capacity = 64 }
        tier ram  { location = cpu   capacity = 24GiB }
        tier ssd  { location = disk  path = "/models/x" }
        on demote(hot -> warm)  { mechanism = in_place_requant }
        on promote(warm -> hot) { trigger_threshold = 0.7 }
        eviction = lru
    }
    per_layer_hierarchy {
        band layers = 0..7  { tier hot { location = gpu  capacity = 4 }  eviction = lru }
        band layers = 8..23 { tier hot { location = gpu  capacity = 8 }  eviction = lfu }
    }
}
"""


_TIER_PIECES = ["tier", "band", "on", "hierarchy", "per_layer_hierarchy", "hot", "warm", "ram",
                "{", "}", "(", ")", "->", "..", "=", "gpu:1", "gpu : 1", "0..7", "7..0", "layers",
                "demote", "promote", "weighted_sum(", "lru = 0.5", ",", "location", "capacity",
                "dtype", "int4", "dtype_ladder = [", "]", "24GiB", "disk", "cpu", "\n", " ", ";",
                "#c\n", "when", "mechanism = in_place_requant", "trigger_threshold = 2"]


@st.composite
def malformed(draw):
    text = draw(st.sampled_from([README_EXAMPLE, SPEC_EXAMPLE, _corpus()]))
    for _ in range(draw(st.integers(1, 4))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 30)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "cut"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(_TIER_PIECES)) + text[i:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i]
    return text


def _corpus() -> str:
    with open(CORPUS, encoding="utf-8") as f:
        return f.read()


def disk_policy(folder, gpu: int = 3, ram: int = 5, extra: str | None = None) -> str:
    """A policy of ``gpu`` device slots over ``ram`` host records over a disk tier written
    under ``folder``; ``extra``: more blocks (default: history prefetch, budget 2 or less)."""
    if extra is None:
        extra = f"prefetch {{ strategy = history  budget = {min(gpu, 2)} }}"
    return f'''policy t {{
    hierarchy {{
        tier g {{ location = gpu  capacity = {gpu} }}
        tier r {{ location = cpu  capacity = {ram} }}
        tier d {{ location = disk  path = "{folder}" }}
    }}
    {extra}
}}'''


#: a four-tier hierarchy every kind of tier step runs in (the differential tests of the two
#: runtime backends, and the threads tests)
FOUR = """policy four {
    hierarchy {
        tier hot  { location = gpu  capacity = 3 }
        tier warm { location = gpu  dtype = int4  capacity = 5  eviction = lfu }
        tier ram  { location = cpu  capacity = 8 }
        tier ssd  { location = disk }
        on demote(hot -> warm) { mechanism = in_place_requant }
        on promote(warm -> hot) { trigger_threshold = 0.2 }
        eviction = lru
    }
    prefetch { strategy = history  budget = 2 }
}
"""


def four_in_parts(split: int) -> str:
    """FOUR with its experts cached as ``split`` parts."""
    return FOUR.replace("eviction = lru\n", f"eviction = lru\n granularity_split = {split}\n")
