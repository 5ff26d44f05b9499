// The interpreter probe against real processes: a real python3 with a fake server (`lsp`
// and the packages it imports) on the bundled path, fake interpreters (shell scripts), a
// missing command, a hang. The probe finds the server without running any of its code.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import { probe, SERVER_PACKAGES, serverEnvironment } from "../../src/probe";

const PYTHON = process.env.MPL_TEST_PYTHON ?? "python3";

function tmpdir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "mpl-probe-"));
}

/** A folder with a fake `lsp` package (`server.py` and `__init__.py` as given) and, unless
 *  left out, a package for each of the server's imports. */
function fakeLsp(serverPy: string, initPy = "", without: string[] = []): string {
  const libs = tmpdir();
  fs.mkdirSync(path.join(libs, "lsp"));
  fs.writeFileSync(path.join(libs, "lsp", "__init__.py"), initPy);
  fs.writeFileSync(path.join(libs, "lsp", "server.py"), serverPy);
  for (const pkg of SERVER_PACKAGES.filter((p) => !without.includes(p))) {
    fs.mkdirSync(path.join(libs, pkg));
    fs.writeFileSync(path.join(libs, pkg, "__init__.py"), "");
  }
  return libs;
}

/** An interpreter without site-packages (`python3 -S`): it finds only what PYTHONPATH has. */
function bareInterpreter(): string {
  return script(`exec "${PYTHON}" -S "$@"`);
}

function script(body: string): string {
  const file = path.join(tmpdir(), "fake-python");
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

void test("serverEnvironment: useBundled puts the libraries first and drops user site", () => {
  const env = serverEnvironment("useBundled", "/ext/server/libs", { PYTHONPATH: "/mine", PATH: "/bin" });
  assert.equal(env.PYTHONPATH, ["/ext/server/libs", "/mine"].join(path.delimiter));
  assert.equal(env.PYTHONNOUSERSITE, "1");
  assert.equal(env.PATH, "/bin");
  const plain = serverEnvironment("fromEnvironment", "/ext/server/libs", { PYTHONPATH: "/mine" });
  assert.equal(plain.PYTHONPATH, "/mine");
  assert.equal(plain.PYTHONNOUSERSITE, undefined);
  assert.equal(serverEnvironment("useBundled", "/l", {}).PYTHONPATH, "/l");
});

void test("a python that finds the (bundled) server passes, with its version", async () => {
  const libs = fakeLsp("ANSWER = 42\n");
  const r = await probe(bareInterpreter(), serverEnvironment("useBundled", libs));
  assert.equal(r.ok, true, r.reason);
  assert.equal(r.runs, true);
  assert.match(r.version ?? "", /^3\.\d+\.\d+$/);
});

void test("the probe runs none of the server's code: it finds the modules, it does not import them", async () => {
  // importing the real server (pygls, lsprotocol, the checker) is most of a server start:
  // here an import would leave a file behind, or hang until the probe gives up
  const marker = path.join(tmpdir(), "imported");
  const touch = `open(${JSON.stringify(marker)}, "a").close()\n`;
  const libs = fakeLsp(`${touch}import time\ntime.sleep(60)\n`, touch);
  const r = await probe(bareInterpreter(), serverEnvironment("useBundled", libs), 15000);
  assert.equal(r.ok, true, r.reason);
  assert.equal(fs.existsSync(marker), false, "the probe imported lsp or lsp.server");
});

void test("an environment without the server, or without one of its packages, says what it lacks", async () => {
  const py = bareInterpreter();
  const none = await probe(py, serverEnvironment("fromEnvironment", "", { PYTHONPATH: tmpdir() }));
  assert.equal(none.ok, false);
  assert.equal(none.runs, true, "the interpreter runs: the bundled server could use it");
  assert.equal(none.reason, `the language server is not installed there (missing lsp.server, ${SERVER_PACKAGES.join(", ")})`);
  const noPygls = await probe(py, serverEnvironment("useBundled", fakeLsp("", "", ["pygls"])));
  assert.equal(noPygls.ok, false);
  assert.equal(noPygls.reason, "the language server is not installed there (missing pygls)");
  // an `lsp` that is a module, not the server's package
  const other = tmpdir();
  fs.writeFileSync(path.join(other, "lsp.py"), "");
  const notOurs = await probe(py, serverEnvironment("useBundled", other));
  assert.match(notOurs.reason ?? "", /\(missing lsp\.server, /);
});

void test("the probe looks in the server's working folder, as python -m lsp.server does", async () => {
  const ws = fakeLsp("");
  const py = bareInterpreter();
  const elsewhere = await probe(py, serverEnvironment("fromEnvironment", "", {}), 15000, tmpdir());
  assert.equal(elsewhere.ok, false);
  const inWs = await probe(py, serverEnvironment("fromEnvironment", "", {}), 15000, ws);
  assert.equal(inWs.ok, true, inWs.reason);
});

void test("an interpreter that fails to run the probe says why", async () => {
  const r = await probe(script('echo "Fatal Python error: init_fs_encoding" >&2; exit 1'), process.env);
  assert.equal(r.ok, false);
  assert.equal(r.runs, undefined);
  assert.equal(r.reason, "cannot be run (Fatal Python error: init_fs_encoding)");
});

void test("a missing interpreter is 'not found'", async () => {
  const r = await probe(path.join(tmpdir(), "no-such-python"), process.env);
  assert.deepEqual(r, { ok: false, reason: "not found" });
});

void test("an old Python is refused with the version it has", async () => {
  // the probe script exits 3 after printing the version when Python is too old
  const r = await probe(script('echo 3.9.18; exit 3'), process.env);
  assert.equal(r.ok, false);
  assert.equal(r.version, "3.9.18");
  assert.match(r.reason ?? "", /Python 3\.9\.18 is too old \(3\.11 or newer is needed\)/);
});

void test("an interpreter that hangs is given up on", async () => {
  const r = await probe(script("sleep 10"), process.env, 300);
  assert.equal(r.ok, false);
  assert.match(r.reason ?? "", /did not answer/);
});
