/**
 * Finding a Python interpreter that can run the language server.
 *
 * Order: the `mpl.server.pythonPath` setting, then the Python extension's active interpreter
 * (when ms-python.python is installed), then `python3` (and `python`) from PATH. Every
 * candidate is probed by importing the server (`python -c "import lsp.server"`), with the
 * bundled libraries on PYTHONPATH when the import strategy is `useBundled`.
 */
import { execFile } from "child_process";
import * as vscode from "vscode";

export const MIN_PYTHON: [number, number] = [3, 11];

export interface Candidate {
  /** Interpreter command or path. */
  command: string;
  /** Where it came from, for messages. */
  source: string;
}

export interface ProbeResult {
  ok: boolean;
  /** `major.minor.micro` when the interpreter ran at all. */
  version?: string;
  /** Why the candidate cannot run the server. */
  reason?: string;
}

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
export async function candidates(configured: string, resource?: vscode.Uri): Promise<Candidate[]> {
  const out: Candidate[] = [];
  if (configured !== "") {
    // An explicit setting is the only candidate: silently trying others would hide a typo.
    out.push({ command: configured, source: "the mpl.server.pythonPath setting" });
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

/** The probe run by each candidate: version check, then the server import. */
export const PROBE_SCRIPT = [
  "import sys",
  `v = sys.version_info`,
  `print('%d.%d.%d' % v[:3])`,
  `if v < (${MIN_PYTHON[0]}, ${MIN_PYTHON[1]}): sys.exit(3)`,
  "import lsp.server",
].join("\n");

export function probe(command: string, env: NodeJS.ProcessEnv, timeoutMs = 20000): Promise<ProbeResult> {
  return new Promise((resolve) => {
    execFile(
      command,
      ["-c", PROBE_SCRIPT],
      { env, timeout: timeoutMs, windowsHide: true },
      (error, stdout, stderr) => {
        const version = stdout.trim().split(/\r?\n/)[0] || undefined;
        if (error === null) {
          resolve({ ok: true, version });
          return;
        }
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "ENOENT") {
          resolve({ ok: false, reason: "not found" });
        } else if (error.killed) {
          resolve({ ok: false, version, reason: `did not answer within ${timeoutMs / 1000} s` });
        } else if (error.code === 3) {
          resolve({
            ok: false,
            version,
            reason: `Python ${version ?? "?"} is too old (${MIN_PYTHON.join(".")} or newer is needed)`,
          });
        } else {
          const last = stderr.trim().split(/\r?\n/).pop() || error.message;
          resolve({ ok: false, version, reason: `cannot import the language server (${last})` });
        }
      },
    );
  });
}
