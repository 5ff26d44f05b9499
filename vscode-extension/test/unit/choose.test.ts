// Choosing the server from the candidates, against real processes: a bad
// mpl.server.pythonPath is named in the message with the settings tab that set it and why it
// failed (not found, too old, no server), instead of a generic "install Python".
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import { Candidate, chooseFrom, isFailure } from "../../src/choose";

const PYTHON = process.env.MPL_TEST_PYTHON ?? "python3";

function tmpdir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "mpl-choose-"));
}

function script(body: string): string {
  const file = path.join(tmpdir(), "fake-python");
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

function configured(command: string, value: string, scope: string): Candidate[] {
  return [{ command, source: `the mpl.server.pythonPath setting (${scope})`, setting: { value, scope } }];
}

void test("a pythonPath that does not exist: its value, expansion and settings tab are named", async () => {
  const ws = tmpdir();
  const value = "${workspaceFolder}/.venv/bin/python";
  const cands = configured(path.join(ws, ".venv", "bin", "python"), value, "Workspace settings");
  const r = await chooseFrom(cands, "auto", tmpdir(), true, ws);
  assert.ok(isFailure(r));
  assert.match(r.message, /no suitable Python/);
  assert.ok(r.message.includes(`"${value}"`), r.message);
  assert.ok(r.message.includes(`expanded to "${path.join(ws, ".venv", "bin", "python")}"`), r.message);
  assert.ok(r.message.includes("set by mpl.server.pythonPath in Workspace settings, was not found"), r.message);
  assert.ok(r.message.includes("Point mpl.server.pythonPath in Workspace settings at a Python 3.11"), r.message);
  assert.ok(!r.message.includes("Install Python"), r.message);
  // the log has one line per try (the environment's server, then the bundled one)
  assert.equal(r.details.length, 2);
  assert.ok(r.details.every((d) => d.endsWith(": not found")), r.details.join("\n"));
});

void test("a pythonPath in Folder settings that is too old says so", async () => {
  const old = script("echo 3.9.18; exit 3");
  const r = await chooseFrom(configured(old, old, "Folder settings"), "useBundled", tmpdir(), true, undefined);
  assert.ok(isFailure(r));
  assert.ok(r.message.includes(`"${old}", set by mpl.server.pythonPath in Folder settings, cannot be used: ` +
    "Python 3.9.18 is too old (3.11 or newer is needed)"), r.message);
  assert.ok(!r.message.includes("expanded to"), r.message);
});

void test("fromEnvironment with a pythonPath that lacks the server: install it there, or choose the bundled one", async () => {
  const bare = script(`echo 3.12.1; echo "ModuleNotFoundError: No module named 'lsp'" >&2; exit 1`);
  const r = await chooseFrom(configured(bare, "~/venvs/bare/bin/python", "User settings"), "fromEnvironment",
    tmpdir(), true, undefined);
  assert.ok(isFailure(r));
  assert.ok(r.message.includes(`"~/venvs/bare/bin/python" (expanded to "${bare}"), set by mpl.server.pythonPath in ` +
    "User settings, cannot be used: cannot import the language server (ModuleNotFoundError: No module named 'lsp')"),
  r.message);
  assert.ok(r.message.includes('pip install "mpl-policylang[lsp]"') && r.message.includes("bundled server"), r.message);
});

void test("without a pythonPath the message is the general one", async () => {
  const r = await chooseFrom([{ command: path.join(tmpdir(), "python3"), source: "python3 on PATH" }], "auto",
    tmpdir(), true, undefined);
  assert.ok(isFailure(r));
  assert.match(r.message, /no suitable Python found to run the language server\. Install Python 3\.11 or newer/);
});

void test("a good pythonPath starts the bundled server", async () => {
  const libs = tmpdir();
  fs.mkdirSync(path.join(libs, "lsp"));
  fs.writeFileSync(path.join(libs, "lsp", "__init__.py"), "");
  fs.writeFileSync(path.join(libs, "lsp", "server.py"), "");
  const r = await chooseFrom(configured(PYTHON, PYTHON, "User settings"), "useBundled", libs, true, undefined);
  assert.ok(!isFailure(r), isFailure(r) ? r.message : "");
  assert.match(r.description, /from the mpl\.server\.pythonPath setting \(User settings\)\), bundled server/);
  assert.deepEqual(r.executable.args, ["-m", "lsp.server"]);
});
