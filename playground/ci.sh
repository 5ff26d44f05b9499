#!/usr/bin/env bash
# CI for the browser playground (called by .ci/run): build it, then drive it in Debian's
# Chromium (headless, playwright-core) with test/browser.test.mjs, which compares what the
# page shows with mplc for the same policy and trace. Installs Chromium with apt-get when it
# is missing; when the package index cannot be reached for that, the browser test is
# SKIPPED (said so) and the build alone is checked. Screenshots: test/screenshots/.
set -euo pipefail
cd "$(dirname "$0")"
export PYTHON="${PYTHON:-$(command -v python || command -v python3)}"

step() { printf '\n== %s\n' "$*"; }

step "build (npm ci + scripts/build.mjs) with a new virtual environment's Python"
# what a new user's `python -m venv` gives: pip, and on Python 3.11 a setuptools too old to
# build a wheel (on 3.12+ none): the build installs what it needs itself
FRESH="$(mktemp -d)"
trap 'rm -rf "$FRESH"' EXIT
"$PYTHON" -m venv "$FRESH/venv"
echo "   the new environment has: $("$FRESH/venv/bin/python" -m pip list --format=freeze --disable-pip-version-check | tr '\n' ' ')"
PYTHON="$FRESH/venv/bin/python" bash build.sh

step "the Python side under CPython (the glue against the CLI)"
( cd .. && "$PYTHON" -m pytest -q -p no:cacheprovider -o addopts="-ra" tests/test_playground.py )

step "Chromium"
CHROMIUM="${CHROMIUM:-$(command -v chromium || true)}"
if [ -z "$CHROMIUM" ]; then
    if ! command -v apt-get >/dev/null; then
        echo "SKIPPED: the browser test: no chromium and no apt-get to install it"
        exit 0
    fi
    if ! DEBIAN_FRONTEND=noninteractive apt-get update -q --error-on=any >/tmp/mpl-playground-apt.log 2>&1; then
        tail -5 /tmp/mpl-playground-apt.log
        echo "SKIPPED: the browser test: Debian's package index cannot be reached to install chromium"
        exit 0
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/tmp/mpl-playground-apt.log 2>&1 \
        || { tail -20 /tmp/mpl-playground-apt.log; echo "apt-get install chromium failed" >&2; exit 1; }
    CHROMIUM="$(command -v chromium)"
fi
export CHROMIUM
"$CHROMIUM" --version 2>/dev/null | head -1 || true

step "browser test (headless Chromium over the built site)"
node test/browser.test.mjs
