"""Files, imports and ``extends``: loads every imported file once (relative to the importing
file, or ``std/NAME`` from the standard library), detects import cycles (MPL109), builds each
file's scope of visible policies (duplicates: MPL106), resolves ``extends`` (unknown parent
MPL107, cycles MPL110) and runs every pass on every policy.

``read_file(path) -> str | None`` lets a caller (the language server) supply the text of a
file, e.g. an unsaved editor buffer; ``None`` means "read it from disk".
"""

from __future__ import annotations

import dataclasses
import os
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Callable

from mpl import schema
from mpl.checker import pins as PINS
from mpl.checker import policy as P
from mpl.checker import structure
from mpl.checker import tiers as T
from mpl.checker.common import Sink, did_you_mean, replace_fix
from mpl.checker.crossfield import LIVE
from mpl.checker.resolved import ResolvedPolicy
from mpl.diagnostics import Related, Span, line_end
from mpl.rules import CODES
from mpl.shapes import ModelShape
from mpl.syntax import ast
# the bounded readers live in mpl/fileio.py; the names other than ReadError and
# read_text_file are re-exported for callers that still import them from here
from mpl.fileio import (ReadError, decode_text, read_capped, read_stdin_text,  # noqa: F401
                        read_text_file, read_text_or_none)


#: a lone surrogate code point in a str (never in text decoded from UTF-8)
SURROGATE = re.compile("[\ud800-\udfff]")


def _regular_file(path: str) -> None:
    """ReadError unless ``path`` is a regular file (or absent: FileNotFoundError follows):
    an import never reads a device, a pipe or a socket (``/dev/stdin`` would read the
    standard input, a FIFO would wait for a writer)."""
    import stat
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise ReadError(f"'{path}' is not a regular file (a device, a pipe or a socket)")


@dataclass
class FileUnit:
    path: str | None
    key: str
    text: str
    document: ast.Document
    sink: Sink
    scope: dict = field(default_factory=dict)        # name -> (ast.Policy, FileUnit)
    resolved: dict = field(default_factory=dict)     # own policy name -> ResolvedPolicy (first)
    own: dict = field(default_factory=dict)          # id(ast.Policy) -> OwnPart
    order: list = field(default_factory=list)        # own ResolvedPolicy in definition order
    invalid_text: bool = False     # holds a lone surrogate: not text, none of its policies load
    syntax_offsets: list | None = None   # sorted offsets of its syntax errors (built on demand)
    import_failed: bool = False    # an import of it was refused or not found (reported there)


@dataclass
class _Frame:
    """A file being built: its imports are walked one by one (``next``), those done are
    collected in ``imported``; ``via`` is the import statement that opened it."""
    unit: FileUnit
    via: ast.Import | None = None
    next: int = 0
    imported: list = field(default_factory=list)     # (ast.Import, FileUnit)


#: import roots used when a caller gives none (``mplc --import-root``; None: no limit)
_default_import_roots: tuple[str, ...] | None = None


def set_default_import_roots(roots) -> None:
    """Folders outside which imports are refused when :func:`mpl.checker.analyze` is given
    no ``import_roots`` (the CLI's ``--import-root``); None lifts the limit."""
    global _default_import_roots
    _default_import_roots = None if roots is None else tuple(os.fspath(r) for r in roots)


def _real_roots(roots) -> tuple[str, ...] | None:
    """The import roots as real paths, with the standard library's folder (``std/`` is
    always importable, and so is what its policies import)."""
    if roots is None:
        roots = _default_import_roots
        if roots is None:
            return None
    from mpl.stdlib_path import stdlib_dir
    out = []
    for r in (*roots, stdlib_dir()):
        try:
            out.append(os.path.realpath(os.fspath(r)))
        except (TypeError, ValueError):
            continue                # not a path: it admits nothing
    return tuple(out)


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    for r in roots:
        try:
            if os.path.commonpath([path, r]) == r:
                return True
        except ValueError:          # different drives, or a relative and an absolute path
            continue
    return False


class Resolver:
    def __init__(self, *, model: ModelShape | None = None, read_file: Callable | None = None,
                 purpose: str = LIVE, import_roots=None) -> None:
        self.model = model
        self.read_file = read_file
        self.purpose = purpose
        self.import_roots = _real_roots(import_roots)
        self.units: dict[str, FileUnit] = {}
        self.stack: list[str] = []          # keys of the files being built, importer first
        self._on_stack: set[str] = set()
        self.load_order: list[FileUnit] = []
        self._by_node: dict[int, ResolvedPolicy] = {}

    # ------------------------------------------------------------ files
    @staticmethod
    def _key(path: str | None) -> str:
        if not path:
            return "<text>"
        try:
            return os.path.realpath(path)
        except ValueError:      # not a usable file path (a NUL, a lone surrogate): as written
            return os.path.abspath(path)

    def build(self, text: str, path: str | None) -> FileUnit:
        """Parse and check ``text`` (the contents of ``path``) with everything it imports.

        Depth first over the imports with an explicit stack (not recursion), so an import
        chain of any depth is fine: a file's imports are built before its own scope and
        policies, and ``self.stack`` is the chain of files being built (import cycles)."""
        root = self._open(text, path)
        frames = [_Frame(root)]
        while frames:
            fr = frames[-1]
            child = self._next_import(fr)
            if child is not None:
                frames.append(child)
                continue
            frames.pop()
            unit = fr.unit
            try:
                self._scope(unit, fr.imported)
                self._policies(unit)
            finally:
                self.stack.pop()
                self._on_stack.discard(unit.key)
            if frames:
                frames[-1].imported.append((fr.via, unit))
        return root

    def _open(self, text: str, path: str | None) -> FileUnit:
        """Parse a file, register it and put it on the stack of files being built."""
        from mpl.syntax import parse

        key = self._key(path)
        result = parse(text, path)
        sink = Sink(path, text)
        for d in result.diagnostics:
            sink.diags.append(d if d.file == path else dataclasses.replace(d, file=path))
        unit = FileUnit(path, key, text, result.document, sink)
        self.units[key] = unit
        self.load_order.append(unit)
        self.stack.append(key)
        self._on_stack.add(key)
        self._check_text(unit)
        self._check_version(unit)
        return unit

    @staticmethod
    def _check_text(unit: FileUnit) -> None:
        """MPL100 at the first lone surrogate (U+D800-U+DFFF): a ``str`` given to mpl.loads or
        an editor buffer can hold one, but it is not a character and cannot be encoded (a file
        read from disk never has one: it is refused as not UTF-8)."""
        text = unit.text
        if text.isascii():
            return
        m = SURROGATE.search(text)
        if m is None:
            return
        unit.invalid_text = True
        more = len(SURROGATE.findall(text, m.end()))
        tail = f" (and {more} more)" if more else ""
        unit.sink.emit("MPL100", f"the text is not valid Unicode: it holds a lone surrogate "
                       f"U+{ord(m.group()):04X}{tail}, which is not a character and cannot be "
                       f"encoded as UTF-8; remove it", Span.from_offsets(text, m.start(), m.end()))

    def _check_version(self, unit: FileUnit) -> None:
        v = unit.document.version
        if v is None or v.number is None:
            return
        n = v.number
        if n.unit is None and (isinstance(n.value, int) and n.value in schema.SUPPORTED_VERSIONS
                               or _original_version(n.value)):
            return
        sup = ", ".join(str(x) for x in schema.SUPPORTED_VERSIONS)
        lo, hi = schema.ORIGINAL_VERSIONS
        unit.sink.emit("MPL111", f"version {n.text} is not supported; write one of: {sup} (or "
                       f"{schema.format_value(lo)} .. {schema.format_value(hi)}, the original's "
                       f"versions)", n.span)

    def _locate(self, unit: FileUnit, spec: str) -> str | None:
        from mpl.stdlib_path import stdlib_file

        if spec.startswith("std/"):
            return stdlib_file(spec)
        base = os.path.dirname(unit.path) if unit.path else os.getcwd()
        path = os.path.normpath(os.path.join(base, spec))
        if not os.path.splitext(path)[1] in schema.FILE_EXTENSIONS and not os.path.exists(path):
            # `import "b"`: b.moe, else b.policy (the original's later extension)
            for ext in schema.FILE_EXTENSIONS:
                if self._exists(path + ext):
                    return path + ext
            path += schema.FILE_EXTENSIONS[0]
        return path

    def _exists(self, path: str) -> bool:
        """A file at ``path``: on disk, or an editor buffer the caller supplies."""
        if os.path.exists(path):
            return True
        if self.read_file is not None:
            try:
                return isinstance(self.read_file(path), str)
            except Exception:
                return False
        return False

    def _read(self, path: str) -> str:
        if self.read_file is not None:
            try:
                t = self.read_file(path)
            except Exception:        # a caller's reader failing is "no buffer": use the disk
                t = None
            if isinstance(t, str):
                return t
        _regular_file(path)
        return read_text_file(path)

    def _refused(self, unit: FileUnit, spec: str, span: Span, path: str) -> bool:
        """MPL100 when ``path`` lies outside the import roots (True: do not read it)."""
        roots = self.import_roots
        if roots is None:
            return False
        real = self._key(path)
        if _inside(real, roots):
            return False
        shown = ", ".join(roots[:-1]) or "(none)"
        unit.import_failed = True
        unit.sink.emit("MPL100", f"cannot import '{spec}': {path} is outside the import roots "
                       f"({shown}, and std/); move the file under one of them or add its "
                       f"folder with --import-root", span)
        return True

    def _next_import(self, fr: "_Frame") -> "_Frame | None":
        """Go on with ``fr``'s imports: those already built (or refused) are recorded in
        ``fr.imported`` (or reported); the first one that must be built is opened and
        returned as a new frame. None when every import of the file is done."""
        unit = fr.unit
        imports = unit.document.imports
        while fr.next < len(imports):
            imp = imports[fr.next]
            fr.next += 1
            if imp.path is None or not isinstance(imp.path, ast.String):
                continue
            spec = imp.path.value
            span = imp.path.span
            if unit.invalid_text and SURROGATE.search(spec):
                continue                # not a path (MPL100 reported for the text)
            path = self._locate(unit, spec)
            if path is None:
                self._not_found(unit, spec, span, path)
                continue
            key = self._key(path)
            if key in self._on_stack:
                i = self.stack.index(key)
                chain = [self.units[k].path or "<text>" for k in self.stack[i:]] + [path]
                names = " -> ".join(os.path.basename(c) for c in chain)
                unit.sink.emit("MPL109", f"import cycle: {names}; remove one of these imports", span)
                continue
            done = self.units.get(key)
            if done is not None:
                fr.imported.append((imp, done))
                continue
            if self._refused(unit, spec, span, path):
                continue
            try:
                text = self._read(path)
            except FileNotFoundError:
                self._not_found(unit, spec, span, path)
                continue
            except ReadError as e:
                unit.import_failed = True
                unit.sink.emit("MPL100", f"cannot import '{spec}': {e}", span)
                continue
            child = self._open(text, path)
            self._not_a_policy(unit, child, spec, span)
            return _Frame(child, via=imp)
        return None

    @staticmethod
    def _not_a_policy(importer: FileUnit, unit: FileUnit, spec: str, span: Span) -> None:
        """An imported file with syntax errors and no policy is not a policy file (a password
        file, a log): keep only its first diagnostic, so no more than its first offending
        line is shown, and say so at the import."""
        doc = unit.document
        if doc.policies or doc.version is not None or doc.imports:
            return
        errors = [d for d in unit.sink.diags if d.is_error]
        if not errors:
            return
        first = min(errors, key=lambda d: d.span.offset)
        unit.sink.diags[:] = [first]
        importer.import_failed = True
        importer.sink.emit("MPL100", f"cannot import '{spec}': it is not a policy file (no "
                           f"policy, {len(errors)} syntax error{'s' if len(errors) != 1 else ''}; "
                           f"the first is shown)", span)

    def _not_found(self, unit: FileUnit, spec: str, span: Span, path: str | None) -> None:
        from mpl.stdlib_path import stdlib_names

        unit.import_failed = True
        if spec.startswith("std/"):
            names = stdlib_names()
            tail, s = did_you_mean(spec[4:].removesuffix(".moe"), names)
            fixes = (replace_fix(f"Import std/{s}", span, f'"std/{s}"'),) if s else ()
            if not tail:
                tail = "; available: " + ", ".join("std/" + n for n in names)
            unit.sink.emit("MPL108", f"no standard-library policy '{spec}'{tail}", span, fixes=fixes)
            return
        where = f" (looked for {path})" if path else ""
        if path and not os.path.splitext(spec)[1] in schema.FILE_EXTENSIONS:
            stem = path[:-len(schema.FILE_EXTENSIONS[0])]
            where = " (looked for " + " and ".join(stem + e for e in schema.FILE_EXTENSIONS) + ")"
        fixes, tail = (), "; the path is relative to the importing file"
        if path:
            folder = os.path.dirname(path)
            try:
                names = [n for n in os.listdir(folder) if os.path.splitext(n)[1] in schema.FILE_EXTENSIONS]
            except OSError:
                names = []
            _, s = did_you_mean(os.path.basename(path), names)
            if s:
                new = os.path.join(os.path.dirname(spec), s).replace(os.sep, "/")
                tail = f"; did you mean '{new}'?"
                fixes = (replace_fix(f"Import \"{new}\"", span, f'"{new}"'),)
        unit.sink.emit("MPL108", f"cannot find imported file '{spec}'{where}{tail}", span, fixes=fixes)

    # ------------------------------------------------------------ scope
    def _scope(self, unit: FileUnit, imported: list) -> None:
        scope: dict = {}
        for imp, other in imported:
            if not scope:               # nothing to clash with: take the file's scope whole
                scope = dict(other.scope)
                continue
            for name, (pol, owner) in other.scope.items():
                prev = scope.get(name)
                if prev is not None and prev[0] is not pol:
                    unit.sink.emit("MPL106", f"policy '{name}' from '{imp.path.value}' is already defined in "
                                   f"'{prev[1].path or '<text>'}'; rename one of them", imp.path.span,
                                   related=(Related("the other definition", _name_span(prev[0]),
                                                    file=prev[1].path),))
                    continue
                scope[name] = (pol, owner)
        for pol in unit.document.policies:
            if pol.name is None:
                continue
            name = pol.name.text
            prev = scope.get(name)
            if prev is not None:
                same = prev[1] is unit
                where = "earlier in this file" if same else f"in '{prev[1].path}'"
                unit.sink.emit("MPL106", f"policy '{name}' is already defined {where}; rename this one",
                               pol.name.span,
                               related=(Related("first defined here", _name_span(prev[0]),
                                                file=None if same else prev[1].path),))
                continue
            scope[name] = (pol, unit)
        unit.scope = scope

    # ------------------------------------------------------------ policies
    def _policies(self, unit: FileUnit) -> None:
        doc = unit.document
        for pol in doc.policies:
            if pol.name is None:
                continue
            unit.own[id(pol)] = structure.check_policy_body(pol, pol.name.text, unit.sink)
        cyclic = self._extends_cycles(unit)
        for pol in doc.policies:
            if pol.name is None:
                continue
            rp = self._resolve(unit, pol, cyclic)
            unit.resolved.setdefault(pol.name.text, rp)
        if not doc.policies and not any(d.is_error for d in unit.sink.diags):
            end, _ = line_end(unit.text, 0)
            unit.sink.emit("MPL112", "this file defines no policy; add 'policy NAME { cache { capacity = N } }'",
                           Span.from_offsets(unit.text, 0, end))
        self._mark_errors(unit)

    def _extends_cycles(self, unit: FileUnit) -> set[int]:
        """ids of the policies of this file on an extends cycle (MPL110 reported on each).

        Within a file each policy has at most one parent, so the policies on a cycle are
        found by one walk over the parent links (linear in the number of policies)."""
        def parent(pol):
            if pol.parent is None:
                return None
            entry = unit.scope.get(pol.parent.text)
            return entry[0] if entry is not None and entry[1] is unit else None

        DONE = -1
        state: dict[int, int] = {}          # id -> position on the current walk, or DONE
        cycle_of: dict[int, tuple[list, int]] = {}
        for start in unit.document.policies:
            if start.name is None or id(start) in state:
                continue
            walk = []
            cur = start
            while cur is not None and id(cur) not in state:
                state[id(cur)] = len(walk)
                walk.append(cur)
                cur = parent(cur)
            if cur is not None and state[id(cur)] != DONE:      # back onto this walk
                ring = walk[state[id(cur)]:]
                for i, pol in enumerate(ring):
                    cycle_of[id(pol)] = (ring, i)
            for pol in walk:
                state[id(pol)] = DONE
        cyclic: set[int] = set()
        for pol in unit.document.policies:
            found = cycle_of.get(id(pol)) if pol.name is not None else None
            if found is None:
                continue
            ring, i = found
            chain = ring[i:] + ring[:i]
            names = " -> ".join(p.name.text for p in chain) + " -> " + pol.name.text
            unit.sink.emit("MPL110", f"extends cycle: {names}; remove one 'extends'", pol.parent.span)
            cyclic.add(id(pol))
        return cyclic

    def _parent_entry(self, unit: FileUnit, pol: ast.Policy, cyclic: set[int]):
        """(parent unit, parent policy) when ``pol`` inherits from a policy, else None
        (no parent, an unknown one, a cycle: :meth:`_resolve_one` reports those)."""
        if pol.parent is None or id(pol) in cyclic:
            return None
        entry = unit.scope.get(pol.parent.text)
        if entry is None or entry[0] is pol:
            return None
        return entry[1], entry[0]

    def _resolve(self, unit: FileUnit, pol: ast.Policy, cyclic: set[int]) -> ResolvedPolicy:
        """The resolved policy of ``pol``: its unresolved ancestors first (walked up with a
        loop, then resolved from the root down, so an extends chain of any depth is fine)."""
        done = self._by_node.get(id(pol))
        if done is not None:
            return done
        chain = []
        seen: set[int] = set()
        u, p, c = unit, pol, cyclic
        while self._by_node.get(id(p)) is None and id(p) not in seen:
            seen.add(id(p))
            chain.append((u, p, c))
            up = self._parent_entry(u, p, c)
            if up is None:
                break
            if up[0] is not u:
                c = set()
            u, p = up
        for u, p, c in reversed(chain):
            self._resolve_one(u, p, c)
        return self._by_node[id(pol)]

    def _resolve_one(self, unit: FileUnit, pol: ast.Policy, cyclic: set[int]) -> ResolvedPolicy:
        """Resolve ``pol`` whose parent (if any) is resolved already."""
        name = pol.name.text
        own = unit.own.get(id(pol)) or structure.OwnPart()
        rp = ResolvedPolicy(name, pol, unit.path, unit.text)
        self._by_node[id(pol)] = rp
        if pol.parent is not None:
            rp.parent = pol.parent.text
            entry = unit.scope.get(pol.parent.text)
            if id(pol) in cyclic:
                rp.has_errors = True
            elif entry is None and unit.import_failed:
                rp.has_errors = True     # most likely defined in the import reported above
            elif entry is None:
                names = [n for n in unit.scope if n != name]
                tail, s = did_you_mean(pol.parent.text, names)
                fixes = (replace_fix(f"Replace '{pol.parent.text}' with '{s}'", pol.parent.span, s),) if s else ()
                if not tail:
                    tail = ("; define it in this file or import the file that defines it"
                            if not names else "; known policies: " + ", ".join(names))
                unit.sink.emit("MPL107", f"policy '{name}' extends unknown policy '{pol.parent.text}'{tail}",
                               pol.parent.span, fixes=fixes)
                rp.has_errors = True
            elif entry[0] is pol:
                rp.has_errors = True     # self-extends: reported as a cycle
            else:
                prp = self._by_node.get(id(entry[0]))
                if prp is None:          # cannot happen: _resolve resolves ancestors first
                    rp.has_errors = True
                else:
                    rp.parent_policy = prp
                    rp.blocks = dict(prp.blocks)
                    rp.block_files = dict(prp.block_files)
                    rp.settings = dict(prp.settings)
                    rp.rules = list(prp.rules)
        for bname, b in own.blocks.items():
            rp.blocks[bname] = b
            rp.block_files[bname] = unit.path
        rp.settings.update(own.settings)
        rp.rules.extend(own.rules)
        base = rp.parent_policy.tiers if rp.parent_policy is not None else T.OwnTiers()
        rp.tiers = T.inherit(base, own.tiers)
        rp.pins = PINS.inherit(rp.parent_policy.pins if rp.parent_policy is not None else None, own.pins)
        rp.own_keys = set(own.settings)
        rp.own_blocks = set(own.blocks)
        rp.syntax_damaged = self._syntax_error_inside(unit, pol)
        P.check_resolved(rp, unit.sink, purpose=self.purpose, model=self.model)
        unit.order.append(rp)
        return rp

    @staticmethod
    def _syntax_error_inside(unit: FileUnit, pol: ast.Policy) -> bool:
        """Whether a syntax error (MPL001-MPL004, reported by the parser) lies inside ``pol``:
        then what the parser could not read must not be reported again as missing."""
        offsets = unit.syntax_offsets
        if offsets is None:
            offsets = unit.syntax_offsets = sorted(
                d.span.offset for d in unit.sink.diags if d.code in _SYNTAX_CODES)
        i = bisect_left(offsets, pol.span.offset)
        return i < len(offsets) and offsets[i] <= pol.span.end_offset

    def _mark_errors(self, unit: FileUnit) -> None:
        """A policy has errors when one lies inside it, its parent has errors, an error
        lies outside every policy (or the text is not valid), or a part of it cannot be
        lowered (a value whose error was reported elsewhere: a recovered, unclosed block). Sorted offsets and bisection:
        O((errors + policies) log errors), not errors x policies."""
        errors = sorted((d.span.offset, d.span.offset == d.span.end_offset)
                        for d in unit.sink.diags if d.is_error)
        offsets = [o for o, _ in errors]
        spans = sorted((p.span.offset, p.span.end_offset) for p in unit.document.policies)
        starts = [a for a, _ in spans]
        reach, far = [], -1        # reach[i]: the furthest end of spans[0..i]
        for _, b in spans:
            far = max(far, b)
            reach.append(far)

        def inside(off: int, empty: bool) -> bool:
            i = bisect_right(starts, off) - 1       # the spans starting at or before off
            return i >= 0 and (off < reach[i] or (empty and off <= reach[i]))

        outside = any(not inside(o, empty) for o, empty in errors)
        for rp in unit.order:
            a, b = rp.node.span.offset, rp.node.span.end_offset
            i = bisect_left(offsets, a)
            mine = i < len(offsets) and offsets[i] <= b
            parent_bad = rp.parent_policy is not None and rp.parent_policy.has_errors
            rp.has_errors = (rp.has_errors or mine or parent_bad or outside or unit.invalid_text
                             or rp.broken_part() is not None
                             or (rp.tiers.present and T.broken_part(rp.tiers) is not None))


_SYNTAX_CODES = frozenset(c for c, info in CODES.items() if info.group == "syntax")


def _original_version(value) -> bool:
    """``version 0.7`` and below (not negative): the original's language versions."""
    lo, hi = schema.ORIGINAL_VERSIONS
    return isinstance(value, (int, float)) and lo <= value <= hi


def _name_span(pol: ast.Policy) -> Span:
    return pol.name.span if pol.name is not None else pol.span
