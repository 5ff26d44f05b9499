"""Moved to :mod:`mpl.timemodel.timeline` (the simulated-time model that sim/, vllm/ and the CLI
share; docs/internals.md, "Where each job lives"). This name stays an alias of that module, so
``mpl.sim.timeline`` and ``from mpl.sim import timeline`` keep working; new code imports the new home.
"""

import sys

from mpl.timemodel import timeline as _home

sys.modules[__name__] = _home
