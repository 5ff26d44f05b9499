#!/usr/bin/env bash
# CI for the tree-sitter grammar (called by .ci/run):
# 1. the Python bindings (pip install tree-sitter) over the committed parser:
#    tests/test_tree_sitter_grammar.py (every repository .moe parses as mpl parses it, the
#    queries compile and capture, keywords and units are mpl.schema's);
# 2. the tree-sitter CLI, where it can be had: regenerate src/ from grammar.js (it must equal
#    the committed files) and run the corpus tests (test/corpus). npm's tree-sitter-cli
#    downloads its binary from GitHub at install time, which this environment cannot reach,
#    so the CLI is Debian stable's tree-sitter-cli package, unpacked (never installed) into
#    build/ with its C library and run through that library's loader; SKIPPED with the reason
#    when Debian's archive cannot be reached. TREE_SITTER=/path/to/tree-sitter uses another.
set -euo pipefail
cd "$(dirname "$0")"
HERE="$(pwd)"
PY="${PYTHON:-$(command -v python || command -v python3)}"
TS_PY_VERSION=0.26.1

step() { printf '\n== %s\n' "$*"; }

step "Python bindings: tree-sitter==$TS_PY_VERSION"
"$PY" -m pip install -q --disable-pip-version-check "tree-sitter==$TS_PY_VERSION"
( cd ../.. && "$PY" -m pytest -q -p no:cacheprovider -o addopts="-ra" tests/test_tree_sitter_grammar.py )

step "tree-sitter CLI"
cli=()
if [ -n "${TREE_SITTER:-}" ]; then
    cli=("$TREE_SITTER")
else
    work="$HERE/build/cli"
    libdir="$work/root/usr/lib/x86_64-linux-gnu"
    if [ ! -x "$work/root/usr/bin/tree-sitter" ]; then
        if [ "$(uname -m)" != x86_64 ] || ! command -v apt-get >/dev/null; then
            echo "SKIPPED: the tree-sitter CLI checks (no npm/Debian binary for this machine)"
            exit 0
        fi
        mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
        echo "deb http://deb.debian.org/debian stable main" > "$work/sources.list"
        apt=(-o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=- \
             -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1)
        if ! apt-get "${apt[@]}" update -q --error-on=any >"$work/apt.log" 2>&1; then
            tail -3 "$work/apt.log"
            echo "SKIPPED: the tree-sitter CLI checks (Debian's archive cannot be reached)"
            exit 0
        fi
        ( cd "$work" && apt-get "${apt[@]}" download tree-sitter-cli libc6 libgcc-s1 >>"$work/apt.log" 2>&1 )
        for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
    fi
    cli=("$libdir/ld-linux-x86-64.so.2" --library-path "$libdir" "$work/root/usr/bin/tree-sitter")
fi
"${cli[@]}" --version

step "src/ is what the CLI generates from grammar.js"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r grammar.js package.json "$tmp/"
( cd "$tmp" && "${cli[@]}" generate --no-bindings )
for f in parser.c grammar.json node-types.json tree_sitter/parser.h; do
    cmp "$tmp/src/$f" "src/$f" || { echo "src/$f is stale: run tree-sitter generate --no-bindings in editors/tree-sitter-moe" >&2; exit 1; }
done
echo "src/ is up to date"

step "corpus tests (tree-sitter test)"
XDG_CACHE_HOME="$HERE/build/cache" "${cli[@]}" test
