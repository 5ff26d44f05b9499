#!/usr/bin/env bash
# Real-editor end-to-end test of the extension (not part of CI: it installs about 1 GB).
#
#   bash vscode-extension/e2e/run.sh [--update-screenshot]
#
# 1. Node 24 from the npm registry (the `node` package), Debian's build tools and Chromium
#    (apt-get, when missing and running as root);
# 2. code-server and puppeteer-core from npm, built with Node 24 (native modules);
# 3. the extension's .vsix (npm ci, esbuild, bundled Python server, vsce package);
# 4. code-server with the .vsix installed, serving a copy of e2e/workspace on 127.0.0.1;
# 5. test.mjs drives headless Chromium: Problems panel shows the checker's codes, completion
#    offers parameter names, hover shows the schema's docs, Format Document gives the
#    formatter's output, semantic tokens keep the grammar's colours (pixels compared in four
#    default themes), inlay hints of a one-line block, a refused Format Document says why,
#    a fresh install runs the bundled server and the server choice stays reachable, the
#    extension's page shows the README's screenshot, and Format Document while the server
#    restarts waits for it (no "no formatter installed" dialog).
#    Screenshots go to e2e/.work/screenshots/;
#    --update-screenshot copies the README's one to images/screenshot.png.
#
# code-server is a remote window: the server's Python is set in User settings only (a
# machine-scoped setting there would be ignored), and it is a bare virtual environment
# without the language server (a fresh install: the default `auto` runs the bundled server).
#
# Environment: MPL_E2E_STRATEGY=auto|useBundled|fromEnvironment (default: unset, the
# extension's default), MPL_E2E_PYTHON (default python3; must have the repository installed,
# for the expected values; the server runs in a bare venv made from it unless
# MPL_E2E_STRATEGY=fromEnvironment), MPL_E2E_SKIP_BUILD=1 reuses dist/moe-policylang.vsix.
set -euo pipefail
E2E="$(cd "$(dirname "$0")" && pwd)"
EXT="$(dirname "$E2E")"
ROOT="$(dirname "$EXT")"
WORK="$E2E/.work"
PY="${MPL_E2E_PYTHON:-python3}"
STRATEGY="${MPL_E2E_STRATEGY:-}"
UPDATE_SHOT=0
[ "${1:-}" = "--update-screenshot" ] && UPDATE_SHOT=1
mkdir -p "$WORK"
log() { printf '\n[e2e] %s\n' "$*"; }

# --- 1. system packages ----------------------------------------------------------------
need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium)
command -v g++ >/dev/null && command -v make >/dev/null || need_apt+=(build-essential)
command -v krb5-config >/dev/null || need_apt+=(libkrb5-dev)
pkg-config --exists libsecret-1 2>/dev/null || need_apt+=(pkg-config libsecret-1-dev)
pkg-config --exists x11 xkbfile 2>/dev/null || need_apt+=(libx11-dev libxkbfile-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
    log "apt-get install ${need_apt[*]}"
    if [ "$(id -u)" != 0 ]; then echo "run as root or install: ${need_apt[*]}" >&2; exit 2; fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
CHROMIUM="$(command -v chromium)"

# --- 2. Node 24, code-server, puppeteer-core -------------------------------------------
N24="$WORK/node24"
if [ ! -x "$N24/node_modules/node/bin/node" ]; then
    log "Node 24 from npm"
    mkdir -p "$N24"
    # npm >= 11.16 runs no dependency install scripts unless allowed: node's fetches the binary
    echo '{"name":"mpl-e2e-node24","private":true,"allowScripts":{"node":true}}' > "$N24/package.json"
    (cd "$N24" && npm install --no-audit --no-fund node@24)
fi
export PATH="$N24/node_modules/node/bin:$PATH"
NODEDIR="$(cd "$N24/node_modules/node/node_modules/node-linux-"* && pwd)"
[ "$(node -p 'process.versions.node.split(".")[0]')" = 24 ] || { echo "Node 24 not found" >&2; exit 2; }

DEPS="$WORK/deps"
if ! cmp -s "$E2E/package.json" "$DEPS/package.json" || [ ! -x "$DEPS/node_modules/.bin/code-server" ]; then
    log "code-server + puppeteer-core (builds native modules with Node 24; several minutes)"
    rm -rf "$DEPS"; mkdir -p "$DEPS"; cp "$E2E/package.json" "$DEPS/package.json"
    # code-server's postinstall runs nested npm installs of its own (no allowScripts there):
    # allow install scripts for this install only; native modules build against Node 24.
    (cd "$DEPS" && npm_config_nodedir="$NODEDIR" npm_config_dangerously_allow_all_scripts=true \
        npm install --no-audit --no-fund)
fi
CODE_SERVER="$DEPS/node_modules/.bin/code-server"

# --- 3. the extension -------------------------------------------------------------------
VSIX="$EXT/dist/moe-policylang.vsix"
if [ "${MPL_E2E_SKIP_BUILD:-0}" != 1 ] || [ ! -f "$VSIX" ]; then
    log "building the .vsix"
    (cd "$EXT" && npm ci --ignore-scripts --no-audit --no-fund && npm run --silent build \
        && "$PY" scripts/bundle_server.py && rm -f "$VSIX" && npm run --silent package)
fi

# --- 4. code-server ---------------------------------------------------------------------
RUN="$WORK/run"
rm -rf "$RUN"; mkdir -p "$RUN/user/User" "$RUN/extensions"
cp -r "$E2E/workspace" "$RUN/workspace"
SHOTS="$WORK/screenshots"; rm -rf "$SHOTS"; mkdir -p "$SHOTS"
# the interpreter the server runs with: a bare venv (no server, no pygls) unless the
# environment's server is asked for
if [ "$STRATEGY" = fromEnvironment ]; then
    SERVER_PY="$(command -v "$PY")"
else
    rm -rf "$WORK/barepy"
    "$PY" -m venv --without-pip "$WORK/barepy"
    SERVER_PY="$WORK/barepy/bin/python"
fi
STRATEGY_LINE=""
[ -n "$STRATEGY" ] && STRATEGY_LINE="\"mpl.server.importStrategy\": \"$STRATEGY\","
# User settings only: code-server is a remote window, where a machine-scoped setting in
# User settings is ignored (mpl.server.pythonPath must work from here)
cat > "$RUN/user/User/settings.json" <<JSON
{
  $STRATEGY_LINE
  "mpl.server.pythonPath": "$SERVER_PY",
  "mpl.trace.server": "messages",
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.colorTheme": "Default Dark Modern",
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "editor.minimap.enabled": false,
  "editor.hover.delay": 100,
  "editor.quickSuggestions": {"other": false, "comments": false, "strings": false},
  "window.restoreWindows": "none",
  "files.autoSave": "off",
  "chat.disableAIFeatures": true,
  "workbench.secondarySideBar.defaultVisibility": "hidden"
}
JSON
echo "bind-addr: 127.0.0.1:0" > "$RUN/config.yaml"
CS_ARGS=(--config "$RUN/config.yaml" --user-data-dir "$RUN/user" --extensions-dir "$RUN/extensions"
         --disable-telemetry --disable-update-check --disable-workspace-trust
         --disable-getting-started-override)
log "installing the .vsix into code-server"
"$CODE_SERVER" "${CS_ARGS[@]}" --install-extension "$VSIX" --force
PORT="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
log "code-server on 127.0.0.1:$PORT"
"$CODE_SERVER" "${CS_ARGS[@]}" --auth none --bind-addr "127.0.0.1:$PORT" "$RUN/workspace" > "$RUN/code-server.log" 2>&1 &
CS_PID=$!
cleanup() { kill "$CS_PID" 2>/dev/null || true; wait "$CS_PID" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 1 120); do
    node -e 'fetch(process.argv[1]).then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "http://127.0.0.1:$PORT/healthz" && break
    kill -0 "$CS_PID" 2>/dev/null || { cat "$RUN/code-server.log"; echo "code-server died" >&2; exit 1; }
    sleep 0.5
done

# --- 5. expected values, from the repository itself --------------------------------------
# the theme copies the colour test of tests/test_vscode_grammar.py uses are this VS Code's
THEMES="$DEPS/node_modules/code-server/lib/vscode/extensions/theme-defaults/themes"
for t in "$EXT"/test/themes/*.json; do
    cmp -s "$t" "$THEMES/$(basename "$t")" || { echo "FAIL: $t differs from code-server's $(basename "$t"): copy it" >&2; exit 1; }
done
"$PY" - "$RUN/workspace" "$RUN/expected.json" "$EXT" "$VSIX" <<'PY'
import importlib.util, json, re, sys, zipfile
from pathlib import Path
import mpl.checker, mpl.fmt
from mpl import schema
ws, out, ext, vsix = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4]
diags = mpl.checker.check(str(ws / "errors.moe"))
spec = importlib.util.spec_from_file_location("theme_colors", ext / "scripts" / "theme_colors.py")
tc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tc)
# colors.moe: (line, column, text, grammar scope) of tokens whose colour is compared
TOKENS = [(1, 1, "version", "keyword.other.version.moe"), (3, 1, "policy", "storage.type.policy.moe"),
          (3, 8, "tuned", "entity.name.type.policy.moe"), (3, 14, "extends", "storage.modifier.extends.moe"),
          (3, 22, "lru_basic", "entity.other.inherited-class.moe"),
          (4, 5, "cache", "entity.name.namespace.block.moe"), (5, 9, "capacity", "variable.parameter.moe"),
          (5, 22, "GiB", "keyword.other.unit.moe"), (6, 20, "lfu", "variable.other.enummember.moe"),
          (9, 19, "true", "constant.language.boolean.moe"), (12, 9, "when", "keyword.control.conditional.moe"),
          (12, 14, "hit_rate", "support.variable.metric.moe"), (12, 37, "accesses", "keyword.other.unit.moe"),
          (13, 21, "flush", "support.function.trigger.moe")]
lines = (ws / "colors.moe").read_text().split("\n")
for line, col, text, _ in TOKENS:
    assert lines[line - 1][col - 1:col - 1 + len(text)] == text, (line, col, text)
themes = {}
for setting, file in [("Light Modern", "light_modern"), ("Dark Modern", "dark_modern"),
                      ("Light 2026", "2026-light"), ("Dark 2026", "2026-dark")]:
    th = tc.Theme(ext / "test" / "themes" / f"{file}.json")
    fg = json.loads((ext / "test" / "themes" / f"{file}.json").read_text()).get("colors", {}).get("editor.foreground")
    themes[setting] = [th.scope_color(["source.moe", scope]) or fg for *_, scope in TOKENS]
json.dump({
    "colorTokens": [t[:3] for t in TOKENS],
    "themeColors": themes,
    "codes": sorted({d.code for d in diags}),
    "cacheParams": list(schema.BLOCKS["cache"].param_names()),
    "hoverParam": "eviction",
    "hoverDoc": schema.param("cache.eviction").doc,
    "formatted": mpl.fmt.format_text((ws / "unformatted.moe").read_text()),
    "formattedRestart": mpl.fmt.format_text((ws / "restart_format.moe").read_text()),
    # the README's images as the package links them (ci.sh: in README.md's order), with the
    # file each URL names
    "readmeImages": [[alt, url, str(ext / rel)] for (alt, url), rel in zip(
        re.findall(r"!\[([^\]]*)\]\(([^)\s]+)", zipfile.ZipFile(vsix).read("extension/readme.md").decode()),
        re.findall(r"!\[[^\]]*\]\(([^)\s]+)", (ext / "README.md").read_text()))],
}, open(out, "w"), indent=1)
PY

log "driving headless Chromium (puppeteer-core)"
rc=0
NODE_PATH="$DEPS/node_modules" node "$E2E/test.mjs" \
    --url "http://127.0.0.1:$PORT/?folder=$RUN/workspace" --chromium "$CHROMIUM" \
    --workspace "$RUN/workspace" --expected "$RUN/expected.json" --shots "$SHOTS" \
    --deps "$DEPS/node_modules" --logs "$RUN/user/logs" --settings "$RUN/user/User/settings.json" || rc=$?
if [ "$rc" -ne 0 ]; then
    echo "--- code-server log (tail)"; tail -40 "$RUN/code-server.log"
    find "$RUN/user" -name '*MoE-PolicyLang*.log' -exec sh -c 'echo "--- $1"; tail -40 "$1"' _ {} \;
    exit "$rc"
fi
# the extension started the server the way the settings asked (a bare venv: the bundled
# server, with the fallback said once), and a normal stop or a cancel left no error behind
EXT_LOG="$(find "$RUN/user/logs" -name 'MoE-PolicyLang.log' | head -1)"
if [ "$STRATEGY" = fromEnvironment ]; then WANT_SRV="server from the environment"; else WANT_SRV="bundled server"; fi
if ! grep -F "starting the language server: $SERVER_PY " "$EXT_LOG" | grep -F "from the mpl.server.pythonPath setting" | grep -qF "$WANT_SRV"; then
    echo "FAIL: the extension log does not show '$SERVER_PY' (from the setting) with the $WANT_SRV:" >&2
    grep -F "starting the language server" "$EXT_LOG" >&2 || true
    exit 1
fi
if [ -z "$STRATEGY" ] || [ "$STRATEGY" = auto ]; then
    n="$(grep -cF "the Python environment has no MoE-PolicyLang language server" "$EXT_LOG" || true)"
    [ "$n" = 1 ] || { echo "FAIL: the bundled-server fallback is said $n times in the log, not once" >&2; exit 1; }
fi
if grep -E "\[error\].*(exited with code 0|unknown message id)|Cancel notification for unknown" "$EXT_LOG" >&2; then
    echo "FAIL: log noise (a normal stop or a cancel logged as an error)" >&2
    exit 1
fi
# restarts with checks pending and a refused rename leave no traceback in the log
if grep -nE "Traceback|Event loop is closed" "$EXT_LOG" >&2; then
    echo "FAIL: a traceback in the extension log" >&2
    exit 1
fi
log "server started as asked: $(grep -F "starting the language server: $SERVER_PY " "$EXT_LOG" | head -1 | sed 's/.*server: //')"
if [ "$UPDATE_SHOT" = 1 ]; then
    cp "$SHOTS/readme.png" "$EXT/images/screenshot.png"
    log "updated images/screenshot.png"
fi
log "PASS (screenshots in $SHOTS)"
