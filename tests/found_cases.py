"""Inputs that property tests or users found to break the front end, kept as regression
cases: the property tests run each as an explicit ``@example`` and
``tests/test_checker_found_cases.py`` checks each through ``mplc check``, ``mpl.loads`` and
(in tests/lsp) the language server. Add every case a hunt finds here (see
``tests/property_profiles.py``)."""

#: a half-typed ``capacity`` followed by a pasted policy; the unclosed cache's
#: invalid capacity reached lowering (``mplc check`` exited 3, ``mpl.load`` raised
#: LoweringError)
HALF_TYPED = """policy demo {
    cache { capacity policy demo {
    cache { capacity = 8  eviction = lru }
    prefetch { strategy = lookahead  lookahead = 1 }
    schedule { mode = gpu_only }
}
"""

#: found by the strengthened mutation ("typing stops, a file is pasted") on the code before the
#: fix: an adapt rule's half-typed ``when`` with a policy pasted after it lowered an invalid
#: condition (LoweringError)
HALF_TYPED_WHEN = """policy adapt_hit_rate {
    cache {
        capacity = 16
        eviction = lfu
    }
    adapt {
        when# pasted
policy adapt_hit_rate {
    cache {
        capacity = 16
        eviction = lfu
    }
    adapt {
        when hit_rate < 0.4 for 100 accesses { eviction = lru }
    }
}
"""

#: found by hand while bounding sizes: a size whose byte count does not fit
#: a float made the checker raise OverflowError (``mplc check`` exited 3)
HUGE_SIZE = "policy p {\n    cache { capacity = " + "9" * 400 + " GiB }\n}\n"

#: memory tiers half-typed at the places a user stops: a tier's head, a transition's edge,
#: a weighted_sum's arguments, a band's range; each followed by the rest of the file
HALF_TYPED_TIER = """policy tiers {
  hierarchy {
    tier T0_gpu_hot   { dtype = fp16  location = gpu  capacity = 16 }
    tier { dtype = int4  location = gpu  capacity = 32 }
    on demote(T0_gpu_hot -> ) { mechanism = in_place_requant }
    eviction = weighted_sum(lru = 0.5, lfu
  }
}
policy big {
    per_layer_hierarchy {
        band layers = 0.. { tier hot { location = gpu  capacity = 4 } }
        band layers = 8..23 { tier hot { location = gpu : 1  capacity = 8 } }
    }
}
"""

#: found by the mutated-corpus hunt: a name right before a section's '{' after the head's '='
#: (`tier T1=_gpu_warm { ... }`, grammatical: the head `NAME = value`) was refused by the
#: recovering parser and accepted by the grammar's LALR parser; both accept it now, and the
#: checker says how a tier's head is written (MPL115)
SECTION_HEAD_NAME = """policy tiers {
  hierarchy {
    tier T0_gpu_hot   { dtype = fp16  location = gpu  capacity = 16 }
    tier T1=_gpu_warm  { dtype = int4  location = gpu  capacity = 32 }
    on demote(T0_gpu_hot -> T1_gpu_warm) { mechanism = in_place_requant }
    eviction = lru
  }
}
policy banded {
    per_layer_hierarchy {
        band layers =
        hot { tier hot { location = gpu  capacity = 6 } }
    }
}
"""

#: found by the grammar's derivations (tests/test_parser_properties.py): a section with a
#: selector head right after a parameter on the same line was garbage after a value to the
#: recovering parser (MPL002, the band skipped) and a section to the grammar; now a section to
#: both, and the checker names the misplaced parameter (MPL102)
SECTION_AFTER_PARAM = """policy banded {
    per_layer_hierarchy { granularity_split = 2 band layers = 0..7 { tier hot { location = gpu  capacity = 4 } } }
}
"""

#: every case: (name, text), each a file with errors (``mplc check`` exits 1)
FOUND = [
    ("half_typed", HALF_TYPED),
    ("half_typed_when", HALF_TYPED_WHEN),
    ("huge_size", HUGE_SIZE),
    ("half_typed_tier", HALF_TYPED_TIER),
    ("section_head_name", SECTION_HEAD_NAME),
    ("section_after_param", SECTION_AFTER_PARAM),
]

#: the cases with memory tiers and syntax errors (tests/test_checker_tiers.py also runs them
#: through mplc fmt, which refuses them)
TIER_CASES = {"half_typed_tier"}
