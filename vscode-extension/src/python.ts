/**
 * Finding a Python interpreter that can run the language server.
 *
 * Order: the `mpl.server.pythonPath` setting, then the Python extension's active interpreter
 * (when ms-python.python is installed), then `python3` (and `python`) from PATH. Every
 * candidate is probed once (`python -c`: its version, and whether the server's modules can be
 * found, without importing them), with the bundled libraries on PYTHONPATH when the import
 * strategy is `useBundled` (see probe.ts).
 */
import * as vscode from "vscode";

import type { Candidate } from "./choose";

export type { Candidate } from "./choose";

/** The Python extension's API, as much of it as we use (ms-python.python >= 2023.x). */
interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { id: string; path: string };
    resolveEnvironment(
      env: { id: string; path: string } | string,
    ): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
  };
}

async function pythonApi(): Promise<PythonExtensionApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonExtensionApi>("ms-python.python");
  if (ext === undefined) {
    return undefined;
  }
  try {
    const api = ext.isActive ? ext.exports : await ext.activate();
    return api?.environments !== undefined ? api : undefined;
  } catch {
    return undefined;
  }
}

/** The Python extension's active interpreter for this resource, if there is one. */
export async function activeInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  const api = await pythonApi();
  const envs = api?.environments;
  if (envs === undefined) {
    return undefined;
  }
  try {
    const envPath = envs.getActiveEnvironmentPath(resource);
    const resolved = await envs.resolveEnvironment(envPath);
    return resolved?.executable.uri?.fsPath ?? envPath.path;
  } catch {
    return undefined;
  }
}

/** Subscribe to the Python extension's interpreter changes (no-op without it). */
export async function onInterpreterChange(listener: () => void): Promise<vscode.Disposable | undefined> {
  const api = await pythonApi();
  const event = api?.environments?.onDidChangeActiveEnvironmentPath;
  return event === undefined ? undefined : event(() => listener());
}

/** Candidates in the order they are tried. */
export async function candidates(
  configured: string,
  resource?: vscode.Uri,
  settingFrom?: string,
  written?: string,
): Promise<Candidate[]> {
  const out: Candidate[] = [];
  if (configured !== "") {
    // An explicit setting is the only candidate: silently trying others would hide a typo.
    const where = settingFrom !== undefined ? ` (${settingFrom})` : "";
    out.push({ command: configured, source: `the mpl.server.pythonPath setting${where}`,
      setting: { value: written ?? configured, scope: settingFrom ?? "settings" } });
    return out;
  }
  const active = await activeInterpreter(resource);
  if (active !== undefined && active !== "") {
    out.push({ command: active, source: "the Python extension's selected interpreter" });
  }
  out.push({ command: "python3", source: "python3 on PATH" });
  if (process.platform === "win32") {
    out.push({ command: "python", source: "python on PATH" });
  }
  return out;
}
