"""IR -> Python policy modules: :func:`generate` (the source) and :mod:`.loader` (compile
once, cache by source hash in memory and on disk)."""

from mpl.codegen.generator import generate

__all__ = ["generate"]
