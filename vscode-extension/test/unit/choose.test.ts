// Choosing the server from the candidates, against real processes: a bad
// mpl.server.pythonPath is named in the message with the settings tab that set it and why it
// failed (not found, too old, no server), instead of a generic "install Python"; each
// candidate is probed once, also when `auto` falls back to the bundled server.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import { Candidate, chooseFrom, isFailure } from "../../src/choose";
import { probe, ProbeResult, SERVER_PACKAGES, serverEnvironment } from "../../src/probe";

const PYTHON = process.env.MPL_TEST_PYTHON ?? "python3";

function tmpdir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "mpl-choose-"));
}

function script(body: string): string {
  const file = path.join(tmpdir(), "fake-python");
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

/** A folder with a fake server: `lsp/server.py` and the packages it imports. */
function fakeServer(): string {
  const dir = tmpdir();
  for (const pkg of ["lsp", ...SERVER_PACKAGES]) {
    fs.mkdirSync(path.join(dir, pkg));
    fs.writeFileSync(path.join(dir, pkg, pkg === "lsp" ? "server.py" : "__init__.py"), "");
  }
  return dir;
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
  // the log has one line per candidate: one probe found that it cannot run at all
  assert.equal(r.details.length, 1);
  assert.ok(r.details[0].endsWith(" with the server from the environment: not found"), r.details.join("\n"));
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
  const bare = script(`echo 3.12.1; echo "missing: lsp.server, pygls"`);
  const r = await chooseFrom(configured(bare, "~/venvs/bare/bin/python", "User settings"), "fromEnvironment",
    tmpdir(), true, undefined);
  assert.ok(isFailure(r));
  assert.ok(r.message.includes(`"~/venvs/bare/bin/python" (expanded to "${bare}"), set by mpl.server.pythonPath in ` +
    "User settings, cannot be used: the language server is not installed there (missing lsp.server, pygls)"),
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
  const libs = fakeServer();
  const r = await chooseFrom(configured(PYTHON, PYTHON, "User settings"), "useBundled", libs, true, undefined);
  assert.ok(!isFailure(r), isFailure(r) ? r.message : "");
  assert.match(r.description, /from the mpl\.server\.pythonPath setting \(User settings\)\), bundled server/);
  assert.deepEqual(r.executable.args, ["-m", "lsp.server"]);
});

void test("auto: one probe per candidate; without the server in any environment, the first that runs gets the bundled one", async () => {
  const libs = tmpdir();
  fs.mkdirSync(path.join(libs, "lsp"));
  fs.writeFileSync(path.join(libs, "lsp", "server.py"), "");
  const missing = path.join(tmpdir(), "python3");
  // a real interpreter without site-packages: it runs, but has no server of its own
  const bare = script(`exec "${PYTHON}" -S "$@"`);
  const cands: Candidate[] = [
    { command: missing, source: "the Python extension's selected interpreter" },
    { command: bare, source: "python3 on PATH" },
  ];
  const probed: [string, string | undefined][] = [];
  const counting = (command: string, env: NodeJS.ProcessEnv, timeoutMs?: number, cwd?: string): Promise<ProbeResult> => {
    probed.push([command, env.PYTHONPATH]);
    return probe(command, env, timeoutMs, cwd);
  };
  const r = await chooseFrom(cands, "auto", libs, true, undefined, counting);
  assert.ok(!isFailure(r), isFailure(r) ? r.message : "");
  assert.deepEqual(probed.map(([c]) => c), [missing, bare], "one probe per candidate, in order");
  assert.ok(probed.every(([, p]) => p === process.env.PYTHONPATH), "probed in their own environments");
  assert.equal(r.executable.command, bare);
  assert.match(r.description, /, bundled server \(/);
  const env = r.executable.options?.env as NodeJS.ProcessEnv | undefined;
  assert.equal(env?.PYTHONPATH?.split(path.delimiter)[0], libs);
  assert.equal(env?.PYTHONNOUSERSITE, "1");
  assert.ok(r.fallback?.includes(`${missing} (from the Python extension's selected interpreter) with the server from the environment: not found`),
    r.fallback);
  assert.ok(r.fallback?.includes(`${bare} (from python3 on PATH) with the server from the environment: ` +
    "the language server is not installed there (missing lsp.server"), r.fallback);
});

void test("auto: an environment with the server runs it, after one probe", async () => {
  const ws = fakeServer();
  let probes = 0;
  const counting = (command: string, env: NodeJS.ProcessEnv, timeoutMs?: number, cwd?: string): Promise<ProbeResult> => {
    probes++;
    return probe(command, env, timeoutMs, cwd);
  };
  const env = serverEnvironment("fromEnvironment", "", {});
  assert.equal(env.PYTHONPATH, undefined);
  // the workspace folder is the server's working folder: `python -m lsp.server` finds it there
  const r = await chooseFrom([{ command: script(`exec "${PYTHON}" -S "$@"`), source: "python3 on PATH" }], "auto",
    tmpdir(), true, ws, counting);
  assert.ok(!isFailure(r), isFailure(r) ? r.message : "");
  assert.equal(probes, 1);
  assert.match(r.description, /, server from the environment$/);
  assert.equal(r.fallback, undefined);
});
