#!/usr/bin/env bash
# Builds the browser playground into playground/dist/ (a static site, git-ignored):
# npm ci (CodeMirror, vscode-textmate, Oniguruma, marked, Pyodide, esbuild from the npm
# registry), then scripts/build.mjs (the mpl wheel from this checkout, lark's wheel from PyPI,
# the bundle). Needs Node 20+ with npm and any Python 3.11+ with pip (PYTHON=... picks it; a
# new virtual environment is enough: what it lacks to build the wheel, pip installs itself).
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-$(command -v python || command -v python3)}"
# no install script is needed (esbuild finds its platform package itself)
npm ci --ignore-scripts --no-audit --no-fund
node scripts/build.mjs --python "$PY"
