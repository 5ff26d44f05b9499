// The interpreter probe against real processes: a real python3 with a fake `lsp` package
// on the bundled path, fake interpreters (shell scripts), a missing command, a hang.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import { probe, serverEnvironment } from "../../src/probe";

const PYTHON = process.env.MPL_TEST_PYTHON ?? "python3";

function tmpdir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "mpl-probe-"));
}

function fakeLsp(serverPy: string): string {
  const libs = tmpdir();
  fs.mkdirSync(path.join(libs, "lsp"));
  fs.writeFileSync(path.join(libs, "lsp", "__init__.py"), "");
  fs.writeFileSync(path.join(libs, "lsp", "server.py"), serverPy);
  return libs;
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

void test("a python that imports the (bundled) server passes, with its version", async () => {
  const libs = fakeLsp("ANSWER = 42\n");
  const r = await probe(PYTHON, serverEnvironment("useBundled", libs));
  assert.equal(r.ok, true, r.reason);
  assert.match(r.version ?? "", /^3\.\d+\.\d+$/);
});

void test("an import error is reported with the exception", async () => {
  const libs = fakeLsp("raise ImportError('no module named pygls (test)')\n");
  const r = await probe(PYTHON, serverEnvironment("useBundled", libs));
  assert.equal(r.ok, false);
  assert.match(r.reason ?? "", /cannot import the language server \(ImportError: no module named pygls \(test\)\)/);
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
