"""Build configuration beyond pyproject.toml: the optional compiled engine.

``mpl.runtime._engine`` (mpl/runtime/c/, plain C against the CPython API: no build requirement
but a C compiler) is built when a compiler is present. Without one, or when the build fails
for any reason, the install still succeeds and every runtime is pure Python
(``mpl.runtime.backend()`` and ``mplc doctor`` say which is in use). ``MPL_NO_EXT=1`` skips
the build on purpose.
"""

import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class optional_build_ext(build_ext):
    """build_ext that never fails the install: a compile error leaves the pure path."""

    def run(self):
        try:
            super().run()
        except Exception as e:          # no compiler, no Python headers, ...
            self._skip(e)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:
            self._skip(e)

    @staticmethod
    def _skip(e):
        sys.stderr.write(
            "\n*** mpl: the compiled engine (mpl.runtime._engine) was not built "
            f"({type(e).__name__}: {e}).\n*** The install continues on the pure-Python "
            "runtime: identical results, slower dispatches and replays.\n\n")


ext_modules = []
if os.environ.get("MPL_NO_EXT", "") in ("", "0"):
    # the compiled engine: one extension from the units of mpl/runtime/c (each rule family,
    # the timeline, the predictor, the budget split, the engine and the helpers in its own
    # file); no contraction into fused multiply-adds: its sums must round exactly as the
    # pure-Python runtime's do
    ext_modules.append(Extension(
        "mpl.runtime._engine", sorted(glob.glob("mpl/runtime/c/*.c")),
        depends=sorted(glob.glob("mpl/runtime/c/*.h")),
        include_dirs=["mpl/runtime/c"],
        extra_compile_args=["-O2", "-ffp-contract=off"] if os.name != "nt" else [],
        optional=True))

setup(ext_modules=ext_modules, cmdclass={"build_ext": optional_build_ext})
