#!/usr/bin/env bash
# CI for the VS Code extension (called by .ci/run when executable; runs offline against the
# npm registry and PyPI only): npm ci, generated files in sync, type-check, lint, unit tests,
# grammar tests covering every scope, esbuild bundle, bundled Python server, vsce package.
set -euo pipefail
cd "$(dirname "$0")"
# the interpreter .ci/run installed the repository into (`python`), unless PYTHON says otherwise
PY="${PYTHON:-$(command -v python || command -v python3)}"
VSIX=dist/moe-policylang.vsix

step() { printf '\n== %s\n' "$*"; }

step "Python: the repository installed with its lsp extra"
# the bundled server's package versions are read from this environment (bundle_server.py):
# without the extra, stop here with the command that fixes it, before the npm steps
"$PY" scripts/bundle_server.py --check

step "npm ci"
# Install scripts are not needed: esbuild finds its platform binary package by itself; keytar
# and vsce-sign (publishing only) would try to download binaries from outside the registry.
npm ci --ignore-scripts --no-audit --no-fund

step "generated grammar matches mpl/schema.py"
"$PY" scripts/gen_grammar.py --check

step "type-check (tsc --noEmit)"
npm run --silent typecheck

step "lint (eslint)"
npm run --silent lint

step "unit tests (node --test)"
npm run --silent test:unit

step "grammar tests (vscode-tmgrammar-test) + scope coverage"
npm run --silent test:grammar

step "bundle (esbuild)"
npm run --silent build

step "bundle the Python language server into server/libs"
"$PY" scripts/bundle_server.py
PYTHONPATH=server/libs PYTHONNOUSERSITE=1 "$PY" - <<'PY'
import os, lsp.server, mpl, pygls, lark
for m in (lsp.server, mpl, pygls, lark):
    assert os.sep + os.path.join("server", "libs") + os.sep in m.__file__, m.__file__
print("bundled server imports from server/libs:", os.path.dirname(lsp.server.__file__))
PY

step "package (vsce)"
rm -f "$VSIX"
npm run --silent package
"$PY" - "$VSIX" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["extension/package.json", "extension/dist/extension.js", "extension/readme.md",
        "extension/LICENSE.txt", "extension/changelog.md",
        "extension/language-configuration.json",
        "extension/syntaxes/moe.tmLanguage.json",
        "extension/images/icon.png",
        "extension/server/libs/lsp/server.py", "extension/server/libs/mpl/schema.py",
        "extension/server/libs/pygls/__init__.py"]
missing = [n for n in need if n not in names]
leaked = sorted(n for n in names if n.startswith(("extension/src/", "extension/node_modules/",
                                                   "extension/e2e/", "extension/test/", "extension/snippets/")))
if missing or leaked:
    sys.exit(f"bad .vsix: missing {missing}, should not contain {leaked[:10]}")
z = zipfile.ZipFile(sys.argv[1])
# the README's images are https: URLs of the repository's raw files (scripts/package.mjs):
# the extension's page keeps only http(s) image sources and its CSP admits only https:, so a
# relative (or data:) image was a broken one there; each must name a file README.md links
import json, re
pkg = json.loads(z.read("extension/package.json"))
repo = pkg["repository"]["url"].removeprefix("git+").removesuffix(".git")
base = f"{repo}/raw/HEAD/{pkg['repository']['directory']}/"
readme = z.read("extension/readme.md").decode()
images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", readme)
linked = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", open("README.md", encoding="utf-8").read())
import os
if not images or images != [base + i for i in linked] or not all(os.path.isfile(i) for i in linked):
    sys.exit(f"bad .vsix: README images {images} are not {base} + README.md's {linked} (files here)")
# Open VSX takes the same .vsix: an open license, a repository, no extension dependencies
# (which would have to exist on Open VSX too), nothing marketplace-only
pkg = __import__("json").loads(z.read("extension/package.json"))
problems = [k for k in ("name", "publisher", "version", "license", "repository") if not pkg.get(k)]
problems += [k for k in ("extensionDependencies", "extensionPack") if pkg.get(k)]
if pkg.get("license") != "MIT" or "extension/LICENSE.txt" not in names:
    problems.append("license")
if problems:
    sys.exit(f"bad .vsix for Open VSX: {problems}")
print(f"{sys.argv[1]}: {len(names)} files, contents checked")
PY
echo
echo "vscode-extension CI passed: $VSIX"
