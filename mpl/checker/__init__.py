"""The checker: every semantic diagnostic of a .moe file, and its lowering to IR.

Entry points:

* :func:`analyze` ``(text, path=None, *, model=None, read_file=None, purpose="live")``
  -> :class:`Analysis`: parse, resolve imports and ``extends``, run every check, lower each
  policy without errors to IR.
* :func:`check` ``(path, *, model=None, purpose="live")`` -> ``list[Diagnostic]``; never
  raises (an unreadable file is ``MPL100``).
* :func:`check_text` ``(text, path=None, *, model=None, purpose="live")`` -> diagnostics.

``purpose`` is ``"live"`` (attach / compile; the default) or ``"replay"``: replay-only values
(``eviction = belady``) are errors (MPL307) only for live use.

Passes (one module each): :mod:`.resolve` (files, imports, scope, extends),
:mod:`.structure` (blocks, parameters, values, adapt actions of one policy's own text),
:mod:`.values` (type/enum/range/unit of one value, conditions), :mod:`.policy` (checks of a
resolved policy: required parts, cross-field placement, adapt semantics, warnings) and
:mod:`.crossfield` (the cross-field and model-aware rules as pure functions).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from mpl.diagnostics import Diagnostic, Span, has_errors, sort_key
from mpl.rules import make

__all__ = ["Analysis", "analyze", "check", "check_text", "read_source", "set_default_import_roots",
           "LIVE", "REPLAY"]


def set_default_import_roots(roots) -> None:
    """Folders outside which imports are refused by default (None: no limit); see analyze."""
    from mpl.checker.resolve import set_default_import_roots as _set
    _set(roots)

LIVE = "live"
REPLAY = "replay"


@dataclass
class Analysis:
    """The result of :func:`analyze`."""
    text: str
    path: str | None
    document: object                               # mpl.syntax.ast.Document
    diagnostics: list[Diagnostic]                   # sorted; each carries its file
    policies: dict = field(default_factory=dict)    # name -> ResolvedPolicy (this file's own)
    ir: dict = field(default_factory=dict)          # name -> PolicyIR (policies without errors)
    imports: dict = field(default_factory=dict)     # path -> Document (every imported file)
    source_hash: str = ""

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)


def _model_shape(model):
    """``model=``: None, a ModelShape, or a preset name / config.json path (resolved here;
    mpl.shapes.ShapeError when unknown)."""
    from mpl import shapes

    if model is None or isinstance(model, shapes.ModelShape):
        return model
    if isinstance(model, (str, os.PathLike)):
        return shapes.resolve(os.fspath(model))
    raise TypeError(f"model must be a mpl.shapes.ModelShape, a preset name or a config.json "
                    f"path, not {type(model).__name__}")


def analyze(text: str, path: str | None = None, *, model=None, read_file: Callable | None = None,
            purpose: str = LIVE, import_roots=None) -> Analysis:
    """Parse and check ``text`` (the contents of ``path``); see the module doc.

    ``import_roots``: folders outside which an import is refused (MPL100); ``std/`` is always
    importable. None: the process default (:func:`set_default_import_roots`, the CLI's
    ``--import-root``), which is no limit unless set."""
    from mpl.checker.resolve import SURROGATE, Resolver
    from mpl.lower import lower, source_hash

    if purpose not in (LIVE, REPLAY):
        raise ValueError(f"purpose must be 'live' or 'replay', not {purpose!r}")
    if not isinstance(text, str):
        raise TypeError(f"analyze() needs a str, not {type(text).__name__}")
    model = _model_shape(model)
    res = Resolver(model=model, read_file=read_file, purpose=purpose, import_roots=import_roots)
    main = res.build(text, path)
    diags: list[Diagnostic] = []
    seen = set()
    for u in res.load_order:
        for d in u.sink.diags:
            k = (d.file, d.code, d.span.offset, d.span.end_offset, d.message)
            if k not in seen:
                seen.add(k)
                diags.append(d)
    diags.sort(key=lambda d: (d.file != path, *sort_key(d)))
    # a text with a lone surrogate (MPL100, none of its policies lower) is hashed with the
    # surrogate replaced: it cannot be encoded as it is
    h = source_hash(u.text if not u.invalid_text else SURROGATE.sub("\ufffd", u.text)
                    for u in res.load_order)
    out = Analysis(text, path, main.document, diags, imports={u.path: u.document for u in res.load_order[1:]},
                   source_hash=h)
    for name, rp in main.resolved.items():
        rp.source_hash = h
        out.policies[name] = rp
        if not rp.has_errors:
            out.ir[name] = lower(rp, source_hash=h, source_path=path)
    return out


def check_text(text: str, path: str | None = None, *, model=None, purpose: str = LIVE,
               read_file: Callable | None = None, import_roots=None) -> list[Diagnostic]:
    return analyze(text, path, model=model, purpose=purpose, read_file=read_file,
                   import_roots=import_roots).diagnostics


def read_source(path: str, *, keep_bom: bool = False) -> tuple[str | None, Diagnostic | None]:
    """(text, None) or (None, an MPL100 diagnostic saying why the file cannot be read).
    A leading byte-order mark is dropped unless ``keep_bom``."""
    from mpl.fileio import ReadError, read_text_file

    try:
        return read_text_file(path, keep_bom=keep_bom), None
    except FileNotFoundError:
        from mpl.stdlib_path import unknown_std_message
        msg = unknown_std_message(path) or f"no such file: '{path}'"
    except ReadError as e:
        msg = str(e)
    return None, make("MPL100", msg, Span(1, 1, 1, 1, 0, 0), file=path)


def read_stdin_source(name: str = "<stdin>") -> tuple[str | None, Diagnostic | None]:
    """As :func:`read_source`, for the standard input (``mplc check -``)."""
    from mpl.fileio import ReadError, read_stdin_text

    try:
        return read_stdin_text(), None
    except ReadError as e:
        return None, make("MPL100", str(e), Span(1, 1, 1, 1, 0, 0), file=name)
    except OSError as e:
        return None, make("MPL100", f"cannot read the standard input: {e.strerror or e}",
                          Span(1, 1, 1, 1, 0, 0), file=name)


def as_path(path, func: str, hint: str = "") -> str:
    """``path`` as a str (os.PathLike and bytes accepted); a TypeError naming ``func`` for
    anything else (``hint`` is appended to its message)."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"{func}() expects a file path (str or os.PathLike), not "
                        f"{type(path).__name__}{hint}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return path


def check(path: str, *, model=None, purpose: str = LIVE, import_roots=None) -> list[Diagnostic]:
    """The diagnostics of the file at ``path``. Never raises on bad input (a ``path`` that is
    not a path at all is a TypeError). ``std/NAME`` names a standard-library policy."""
    from mpl.stdlib_path import resolve
    path = resolve(as_path(path, "check"))
    text, err = read_source(path)
    if err is not None:
        return [err]
    return check_text(text, path, model=model, purpose=purpose, import_roots=import_roots)
