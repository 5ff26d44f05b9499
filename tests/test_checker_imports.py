"""import / extends across files, the standard library, read_file overrides, and where the
diagnostics of imported files land."""

from mpl.checker import analyze, check


def write(tmp_path, name, text):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return str(p)


def test_relative_import_and_extends(tmp_path):
    write(tmp_path, "lib/base.moe", "policy base {\n    cache { capacity = 8; eviction = lfu }\n}\n")
    main = write(tmp_path, "main.moe", 'import "lib/base.moe"\npolicy fast extends base {\n'
                                        '    prefetch { strategy = history }\n}\n')
    a = analyze(open(main).read(), main)
    assert a.diagnostics == []
    p = a.ir["fast"]
    assert p["cache.capacity"] == 8 and p["cache.eviction"] == "lfu" and p["prefetch.strategy"] == "history"
    assert str(tmp_path / "lib" / "base.moe") in a.imports
    assert set(a.ir) == {"fast"}            # only this file's own policies


def test_import_without_extension_and_nested_relative(tmp_path):
    write(tmp_path, "a/b.moe", 'import "../c"\npolicy b extends c { }\n')
    write(tmp_path, "c.moe", "policy c { cache { capacity = 3 } }\n")
    main = write(tmp_path, "main.moe", 'import "a/b.moe"\npolicy m extends b { }\n')
    a = analyze(open(main).read(), main)
    assert a.diagnostics == [] and a.ir["m"]["cache.capacity"] == 3


def test_stdlib_import():
    a = analyze('import "std/lru_basic"\npolicy mine extends lru_basic { cache { capacity = 32 } }\n')
    assert a.diagnostics == []
    assert a.ir["mine"]["cache.capacity"] == 32 and a.ir["mine"]["cache.eviction"] == "lru"


def test_diagnostics_in_imported_files_carry_their_path(tmp_path):
    lib = write(tmp_path, "lib.moe", "policy base {\n    cache { capacity = 8; evicton = lfu }\n}\n")
    main = write(tmp_path, "main.moe", 'import "lib.moe"\npolicy p extends base { }\n')
    diags = check(main)
    [d] = diags
    assert d.code == "MPL102" and d.file == lib and (d.span.line, d.span.column) == (2, 27)
    # the child of a broken parent does not lower
    assert analyze(open(main).read(), main).ir == {}


def test_read_file_supplies_unsaved_buffers(tmp_path):
    write(tmp_path, "lib.moe", "policy base { cache { capacity = 8 } }\n")
    main = str(tmp_path / "main.moe")
    buffers = {str(tmp_path / "lib.moe"): "policy base { cache { capacity = 99 } }\n"}
    a = analyze('import "lib.moe"\npolicy p extends base { }\n', main, read_file=buffers.get)
    assert a.ir["p"]["cache.capacity"] == 99
    # a buffer for a file that does not exist on disk
    buffers[str(tmp_path / "new.moe")] = "policy n { cache { capacity = 5 } }\n"
    a = analyze('import "new.moe"\npolicy p extends n { }\n', main, read_file=buffers.get)
    assert a.diagnostics == [] and a.ir["p"]["cache.capacity"] == 5


def test_duplicate_policy_across_imports(tmp_path):
    lib = write(tmp_path, "lib.moe", "policy p { cache { capacity = 8 } }\n")
    main = write(tmp_path, "main.moe", 'import "lib.moe"\npolicy p { cache { capacity = 4 } }\n')
    [d] = check(main)
    assert d.code == "MPL106" and d.file == main and (d.span.line, d.span.column) == (2, 8)
    assert d.related[0].file == lib and d.related[0].message == "first defined here"


def test_diamond_imports_load_once(tmp_path):
    write(tmp_path, "common.moe", "policy common { cache { capacity = 8 } }\n")
    write(tmp_path, "a.moe", 'import "common.moe"\npolicy a extends common { }\n')
    write(tmp_path, "b.moe", 'import "common.moe"\npolicy b extends common { }\n')
    main = write(tmp_path, "main.moe", 'import "a.moe"\nimport "b.moe"\npolicy m extends b { }\n')
    a = analyze(open(main).read(), main)
    assert a.diagnostics == [] and len(a.imports) == 3


def test_missing_cache_is_fine_through_extends_and_not_repeated():
    a = analyze("policy base { cache { capacity = 8; eviction = lru; frequency_decay = 0.5 } }\n"
                "policy child extends base { prefetch { strategy = history } }\n")
    # the no-effect warning is reported once, on the parent that writes it
    assert [(d.code, d.span.line) for d in a.diagnostics] == [("MPL401", 1)]
    assert set(a.ir) == {"base", "child"}


def test_child_can_break_a_cross_field_rule():
    a = analyze("policy base { cache { capacity = 8; pin = [0, 1, 2] } }\n"
                "policy child extends base { cache { capacity = 2 } }\n")
    [d] = a.diagnostics
    assert d.code == "MPL301" and d.span.line == 2
    assert d.related and "inherited from 'base'" in d.related[0].message
    assert set(a.ir) == {"base"}


def test_child_adding_a_block_can_break_a_rule():
    a = analyze("policy base { cache { capacity = 1 } }\npolicy child extends base { per_layer { } }\n")
    [d] = a.diagnostics
    assert d.code == "MPL309" and d.span.line == 2 and d.span.column == 29   # the per_layer block


def test_extends_chain_cycle_reports_every_member():
    a = analyze("policy a extends c { cache { capacity = 1 } }\npolicy b extends a { }\npolicy c extends b { }\n")
    assert sorted((d.code, d.span.line) for d in a.diagnostics) == [("MPL110", 1), ("MPL110", 2), ("MPL110", 3)]
    assert a.ir == {}


def test_import_cycle_does_not_loop(tmp_path):
    main = write(tmp_path, "self.moe", 'import "self.moe"\npolicy p { cache { capacity = 8 } }\n')
    [d] = check(main)
    assert d.code == "MPL109"


def test_import_not_found_suggests_a_sibling(tmp_path):
    write(tmp_path, "lib/policies.moe", "policy base { cache { capacity = 8 } }\n")
    main = write(tmp_path, "main.moe", 'import "lib/polices.moe"\npolicy p { cache { capacity = 8 } }\n')
    [d] = check(main)
    assert d.code == "MPL108" and "did you mean 'lib/policies.moe'?" in d.message
    assert d.fixes[0].edits[0].new_text == '"lib/policies.moe"'
    [d] = check(write(tmp_path, "other.moe", 'import "zzz.moe"\npolicy p { cache { capacity = 8 } }\n'))
    assert d.code == "MPL108" and "relative to the importing file" in d.message and not d.fixes
