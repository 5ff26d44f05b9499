import assert from "node:assert/strict";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import {
  ConfigReader,
  expandPath,
  initializationOptions,
  MAX_DEBOUNCE_MS,
  readSettings,
  resolveModel,
  settingSource,
} from "../../src/settings";

function config(values: Record<string, unknown>): ConfigReader {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

void test("defaults when nothing is set", () => {
  const s = readSettings(config({}));
  assert.deepEqual(s, {
    importStrategy: "auto",
    pythonPath: "",
    model: "",
    importRoots: [],
    debounceMs: 200,
    inlayHints: { defaults: true, perLayer: true },
  });
});

void test("values are read, trimmed and sanitised", () => {
  const s = readSettings(
    config({
      "server.importStrategy": "useBundled",
      "server.pythonPath": "  /opt/py/bin/python3 ",
      model: " deepseek-v2-lite ",
      debounceMs: 10 ** 9,
      "inlayHints.defaults": false,
      "inlayHints.perLayer": false,
    }),
  );
  assert.equal(s.importStrategy, "useBundled");
  assert.equal(s.pythonPath, "/opt/py/bin/python3");
  assert.equal(s.model, "deepseek-v2-lite");
  assert.equal(s.debounceMs, MAX_DEBOUNCE_MS);
  assert.deepEqual(s.inlayHints, { defaults: false, perLayer: false });
  assert.equal(readSettings(config({ "server.importStrategy": "bogus" })).importStrategy, "auto");
  assert.equal(readSettings(config({ "server.importStrategy": "fromEnvironment" })).importStrategy, "fromEnvironment");
  assert.equal(readSettings(config({ debounceMs: -5 })).debounceMs, 200);
  assert.equal(readSettings(config({ debounceMs: Number.NaN })).debounceMs, 200);
  assert.equal(readSettings(config({ debounceMs: 12.6 })).debounceMs, 13);
});

void test("paths: ~, ${workspaceFolder}, ${userHome}, ${env:NAME}", () => {
  process.env.MPL_TEST_DIR = "/somewhere";
  assert.equal(expandPath("~/venv/bin/python", "/ws"), path.join(os.homedir(), "venv/bin/python"));
  assert.equal(expandPath("${workspaceFolder}/.venv/bin/python", "/ws"), "/ws/.venv/bin/python");
  assert.equal(expandPath("${userHome}/x", undefined), `${os.homedir()}/x`);
  assert.equal(expandPath("${env:MPL_TEST_DIR}/py", undefined), "/somewhere/py");
  assert.equal(expandPath("${env:MPL_TEST_UNSET_VARIABLE}py", undefined), "py");
  // without a workspace folder the variable stays (and the probe reports the path as not found)
  assert.equal(expandPath("${workspaceFolder}/py", undefined), "${workspaceFolder}/py");
});

void test("model: a preset passes through, a path is resolved against the workspace", () => {
  assert.equal(resolveModel("", "/ws"), null);
  assert.equal(resolveModel("mixtral-8x7b", "/ws"), "mixtral-8x7b");
  assert.equal(resolveModel("models/config.json", "/ws"), path.join("/ws", "models/config.json"));
  assert.equal(resolveModel("config.json", "/ws"), path.join("/ws", "config.json"));
  assert.equal(resolveModel("/abs/config.json", "/ws"), "/abs/config.json");
  assert.equal(resolveModel("${workspaceFolder}/c.json", "/ws"), "/ws/c.json");
});

void test("initializationOptions carry exactly the server's settings", () => {
  const s = readSettings(config({ model: "cfg/config.json", debounceMs: 50, "inlayHints.perLayer": false }));
  assert.deepEqual(initializationOptions(s, "/ws"), {
    model: path.join("/ws", "cfg/config.json"),
    debounceMs: 50,
    inlayHints: { defaults: true, perLayer: false },
    importRoots: null,
  });
});

void test("importRoots: a list or one folder, expanded, relative ones resolved; empty is the default", () => {
  const s = readSettings(config({ importRoots: [" policies ", "", 7, "~/shared", "/abs", "${workspaceFolder}/x"] }));
  assert.deepEqual(s.importRoots, ["policies", "~/shared", "/abs", "${workspaceFolder}/x"]);
  assert.deepEqual(initializationOptions(s, "/ws").importRoots, [
    path.join("/ws", "policies"),
    path.join(os.homedir(), "shared"),
    "/abs",
    "/ws/x",
  ]);
  assert.deepEqual(readSettings(config({ importRoots: "/one" })).importRoots, ["/one"]);
  assert.equal(initializationOptions(readSettings(config({ importRoots: [] })), "/ws").importRoots, null);
  assert.equal(initializationOptions(readSettings(config({ importRoots: 3 })), "/ws").importRoots, null);
});

void test("settingSource names the settings tab a value comes from", () => {
  assert.equal(settingSource({ globalValue: "/py" }, false), "User settings");
  assert.equal(settingSource({ globalValue: "/py" }, true), "User or Remote settings");
  assert.equal(settingSource({ globalValue: "/a", workspaceValue: "/b" }, true), "Workspace settings");
  assert.equal(settingSource({ workspaceValue: "/b", workspaceFolderValue: "/c" }, false, true), "Folder settings");
  assert.equal(settingSource({ workspaceValue: "/b", workspaceFolderValue: "/b" }, false), "Workspace settings");
  assert.equal(settingSource(undefined, false), "User settings");
});
