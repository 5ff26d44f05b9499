"""Suite-wide set-up: the Hypothesis profile (``ci``, deterministic, unless
``HYPOTHESIS_PROFILE=hunt``; see ``tests/property_profiles.py``) and the ``property`` marker,
put on every Hypothesis test (``python -m pytest -m property`` runs them all), and the report
header naming the runtime backend the tests run on."""

from hypothesis import is_hypothesis_test

import property_profiles  # noqa: F401  (registers and loads the profile before any test module)


def pytest_configure(config):
    config.addinivalue_line("markers", "property: a Hypothesis property test (run long with "
                                       "HYPOTHESIS_PROFILE=hunt, see tests/property_profiles.py)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_hypothesis_test(getattr(item, "obj", None)):
            item.add_marker("property")


def pytest_report_header(config):
    from mpl.runtime.backend import info as backend_info

    info = backend_info()
    why = f" ({info['reason']})" if info["reason"] else ""
    return [f"mpl runtime backend: {info['backend']}{why}; tests importing both_backends "
            f"run on both"]
