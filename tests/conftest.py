"""Shared pytest hooks: the report header names the runtime backend the tests run on."""


def pytest_report_header(config):
    from mpl.runtime.fast import backend_info

    info = backend_info()
    why = f" ({info['reason']})" if info["reason"] else ""
    return [f"mpl runtime backend: {info['backend']}{why}; tests importing both_backends "
            f"run on both"]
