"""Property tests of the checker: random and mutated inputs (including imported files supplied
through ``read_file``) never make ``analyze`` raise, and every span it reports (diagnostics,
related locations, fix edits) lies inside the text of the file it names, with line/column
consistent with its offsets."""

import glob
import os

from hypothesis import example, given
from hypothesis import strategies as st
from found_cases import HALF_TYPED, HALF_TYPED_WHEN, HUGE_SIZE
from property_profiles import prop

from mpl.checker import analyze
from mpl.diagnostics import Span
from mpl.shapes import preset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = [open(p, encoding="utf-8").read()
          for p in sorted(glob.glob(os.path.join(ROOT, "tests", "corpus", "*.moe")))]
CORPUS += [open(os.path.join(ROOT, "tests", "snapshots", n), encoding="utf-8").read()
           for n in ("crossfield.moe", "warnings.moe")]

TOKENS = ["policy", "p", "q", "base", "extends", "{", "}", "cache", "prefetch", "schedule", "monitor",
          "per_layer", "adapt", "capacity", "eviction", "pin", "budget", "strategy", "mode", "=", "8",
          "0", "-1", "1.5", "1e3", "12GiB", "ms", "steps", "accesses", "lru", "lfu", "belady", "fallback",
          "history", "hybrid", "true", "false", "when", "for", "hit_rate", "miss_rate", "stall_ms",
          "<", ">=", "==", "!=", "|", ":", "[", "]", ",", ";", ".", "trigger", "rebalance", "flush",
          "entropy", "import", '"lib.moe"', '"std/lru_basic"', '"nope.moe"', '"main.moe"', "version",
          "1", "3", "#c\n", "\n", " ", "\t", '"', "@", "é", "lfu_decay", "total_budget", "min_capacity",
          "GiB", "MB", "1MiB", "0.001MiB", "999999999999999999", "1e308", "9" * 60, "expert_size_gb",
          # memory tiers
          "hierarchy", "per_layer_hierarchy", "tier", "hot", "ram", "band", "layers", "0..7", "3..1",
          "on", "demote", "promote", "(", ")", "->", "weighted_sum", "gpu:1", "location", "dtype",
          "int4", "fp16", "gpu", "cpu", "disk", "capacity_factor", "mechanism", "in_place_requant",
          "dtype_ladder", "residency", "always", "trigger_threshold", "granularity_split", "path"]

DIR = os.path.join(os.path.abspath(os.sep), "virtual")
MAIN = os.path.join(DIR, "main.moe")
LIB = os.path.join(DIR, "lib.moe")


def _check_span(s: Span, text: str, what: str) -> None:
    assert 0 <= s.offset <= s.end_offset <= len(text), (what, s, len(text))
    assert s == Span.from_offsets(text, s.offset, s.end_offset), (what, s)


def _check_all(a, texts: dict) -> None:
    for d in a.diagnostics:
        text = texts.get(d.file)
        assert text is not None, d.file
        _check_span(d.span, text, d.code)
        for r in d.related:
            _check_span(r.span, texts[r.file if r.file is not None else d.file], d.code + " related")
        for f in d.fixes:
            for e in f.edits:
                _check_span(e.span, texts[e.file if e.file is not None else d.file], d.code + " fix")


MODELS = [None, preset("deepseek-v2-lite").with_device_memory(16 * 10 ** 9), preset("mixtral")]


def _run(main: str, lib: str | None, model=None, purpose="live"):
    buffers = {MAIN: main}
    if lib is not None:
        buffers[LIB] = lib
    a = analyze(main, MAIN, read_file=buffers.get, model=model, purpose=purpose)
    texts = {MAIN: main, **{p: doc.text for p, doc in a.imports.items()}}
    if lib is not None and LIB in a.imports:
        assert texts[LIB] == lib
    _check_all(a, texts)
    _check_lowering(a)


def _check_lowering(a) -> None:
    """IR exactly for the policies the checker reported clean; a policy without IR comes with
    an error the user sees; lowering never produced a broken IR."""
    for name, rp in a.policies.items():
        assert (name in a.ir) == (not rp.has_errors), name
        assert rp.has_errors or rp.broken_part() is None, name
    if len(a.ir) < len(a.policies):
        assert not a.ok, "a policy has no IR but the analysis reports no error"
    for name, p in a.ir.items():
        assert p.name == name and p.values
        if not p.tiered:
            # the required capacity, unless total_budget or capacity_factor gives it
            # (mpl.schema.missing_required)
            assert (p.values["cache.capacity"] is not None
                    or p.values["cache.capacity_factor"] is not None
                    or (p.per_layer and p.values["per_layer.total_budget"] is not None))
            continue
        for h in [p.hierarchy, *(b.hierarchy for b in p.bands)]:
            if h is None:
                continue
            # the last tier holds every expert; names are unique; every adjacent pair has
            # its demotion and its promotion, and nothing else
            assert h.tiers and h.tiers[-1].location.kind in ("cpu", "disk")
            names = [t.name for t in h.tiers]
            assert len(set(names)) == len(names)
            pairs = [(e.event, e.source, e.target) for e in h.transitions]
            assert pairs == [x for a, b in zip(names, names[1:])
                             for x in (("demote", a, b), ("promote", b, a))]


token_text = st.lists(st.sampled_from(TOKENS), max_size=80).map(" ".join)


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 4))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 40)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "replace", "paste"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "paste":        # typing stops half-way and a whole file is pasted
            text = text[:i] + draw(st.sampled_from(["", " ", "\n"])) + draw(st.sampled_from(CORPUS))
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + draw(st.text(max_size=6)) + text[j:]
    return text


CFG = prop(120)


@CFG
@given(token_text, st.one_of(st.none(), token_text))
def test_random_tokens(main, lib):
    _run('import "lib.moe"\n' + main if lib is not None else main, lib)




@CFG
@example(HALF_TYPED, None, None, "live")
@example(HALF_TYPED, None, MODELS[1], "replay")
@example(HALF_TYPED_WHEN, None, None, "live")
@example(HUGE_SIZE, None, MODELS[1], "live")
@example(HUGE_SIZE, HUGE_SIZE, None, "replay")
@given(mutated(), st.one_of(st.none(), mutated()), st.sampled_from(MODELS), st.sampled_from(["live", "replay"]))
def test_mutated_corpus(main, lib, model, purpose):
    _run('import "lib.moe"\n' + main if lib is not None else main, lib, model, purpose)


@CFG
@given(st.text(max_size=200))
def test_arbitrary_text(text):
    _run(text, None)


def test_every_prefix_of_a_corpus_file():
    text = CORPUS[0] if len(CORPUS[0]) > 200 else max(CORPUS, key=len)
    for cut in range(0, len(text), 3):
        _run(text[:cut], None)


def test_self_and_mutual_imports_through_buffers():
    main = 'import "lib.moe"\nimport "main.moe"\npolicy p extends base { }\n'
    lib = 'import "main.moe"\npolicy base { cache { capacity = 4 } }\n'
    _run(main, lib)
