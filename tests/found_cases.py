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

#: every case: (name, text), each a file with errors (``mplc check`` exits 1)
FOUND = [
    ("half_typed", HALF_TYPED),
    ("half_typed_when", HALF_TYPED_WHEN),
    ("huge_size", HUGE_SIZE),
]
