"""Hypothesis profiles of every property test (loaded by ``tests/conftest.py`` before any test
module is imported; selected with the ``HYPOTHESIS_PROFILE`` environment variable).

* ``ci`` (the default): derandomised, no example database, and no pool of "local constants":
  every run of the suite draws the same examples, so CI passes or fails on the code, never by
  chance. Hypothesis seeds a derandomised test from the test itself, but it also mixes into
  its draws the literals it finds in every project module imported so far
  (``providers._get_local_constants``), so a test run alone and the same test after others
  drew different examples; the ``ci`` profile gives that pool one fixed, empty value. The
  cases a hunt found are kept as explicit ``@example`` rows on the tests, which every profile
  runs first. Hypothesis is pinned (``pyproject.toml``): the examples are a function of its
  version too.
* ``hunt``: random (a new seed each run), each test's example count multiplied by
  ``MPL_HUNT_SCALE`` (default 50), failures saved in the local ``.hypothesis/`` database and
  printed with their ``@reproduce_failure`` blob. Run it to look for new cases::

      HYPOTHESIS_PROFILE=hunt MPL_HUNT_SCALE=50 python -m pytest -m property -x -p no:cacheprovider

  and add each case it finds as an ``@example`` of the test that found it.

A property test takes its settings from :func:`prop` (never ``max_examples`` alone), so the
hunt scales it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
HUNT_SCALE = max(1, int(os.environ.get("MPL_HUNT_SCALE", "50") or 50))

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
          HealthCheck.large_base_example]

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                          suppress_health_check=_QUIET)
settings.register_profile("hunt", derandomize=False, deadline=None, print_blob=True,
                          suppress_health_check=_QUIET)
if PROFILE not in ("ci", "hunt"):
    raise RuntimeError(f"HYPOTHESIS_PROFILE must be 'ci' or 'hunt', not {PROFILE!r}")
settings.load_profile(PROFILE)


def _no_local_constants() -> None:
    """Draws that do not depend on which modules are imported: Hypothesis's pool of constants
    collected from the project's imported modules is made empty and fixed (``ci`` only; the
    hunt keeps it, it finds edge values)."""
    from hypothesis.internal.conjecture import providers

    if not hasattr(providers, "_get_local_constants"):
        return                                  # a Hypothesis without the pool
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    providers.CONSTANTS_CACHE.cache.clear()


if PROFILE == "ci":
    _no_local_constants()


def prop(max_examples: int, **kw) -> settings:
    """The settings of one property test: ``max_examples`` examples under ``ci``,
    ``MPL_HUNT_SCALE`` times as many under ``hunt``; the profile gives the rest."""
    n = max_examples * HUNT_SCALE if PROFILE == "hunt" else max_examples
    return settings(max_examples=n, **kw)
