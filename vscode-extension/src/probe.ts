/**
 * The probe that decides whether an interpreter can run the language server: Python >= 3.11,
 * and whether the environment the server will get has it. One short process per candidate:
 * the server's modules are found by Python's import system, not imported (importing pygls
 * and lsprotocol is most of a server start, about a second, and it was paid once per probe
 * and again by the server itself). No vscode import, so the unit tests run it against real
 * interpreters.
 */
import { execFile } from "child_process";
import * as path from "path";

export const MIN_PYTHON: [number, number] = [3, 11];

/** The top-level packages `python -m lsp.server` imports, besides `lsp` itself. */
export const SERVER_PACKAGES = ["mpl", "pygls", "lsprotocol", "lark"];

export interface ProbeResult {
  /** The interpreter can run the server in this environment: new enough, and it has the server. */
  ok: boolean;
  /** The interpreter runs and is new enough (whether or not it has the server): the bundled
   *  server can run on it. */
  runs?: boolean;
  /** `major.minor.micro` when the interpreter ran at all. */
  version?: string;
  /** Why the candidate cannot run the server. */
  reason?: string;
}

/**
 * The environment the server (and its probe) runs in: `useBundled` puts the extension's
 * vendored libraries first on PYTHONPATH and ignores the user site-packages.
 */
export function serverEnvironment(
  strategy: "fromEnvironment" | "useBundled",
  libs: string,
  base: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base, PYTHONUNBUFFERED: "1", PYTHONIOENCODING: "utf-8" };
  if (strategy === "useBundled") {
    const rest = base.PYTHONPATH ? [base.PYTHONPATH] : [];
    env.PYTHONPATH = [libs, ...rest].join(path.delimiter);
    env.PYTHONNOUSERSITE = "1";
  }
  return env;
}

/**
 * The probe run by each candidate: the version (exit 3 when too old), then `server`, or
 * `missing: NAME, ...` for what the environment lacks. `find_spec` of a top-level name
 * imports nothing; `lsp` is looked up the same way and its folder searched for `server.py`
 * (so `lsp/__init__.py` does not run either).
 */
export const PROBE_SCRIPT = [
  "import sys",
  "v = sys.version_info",
  "print('%d.%d.%d' % v[:3])",
  `if v < (${MIN_PYTHON[0]}, ${MIN_PYTHON[1]}): sys.exit(3)`,
  "import os, importlib.util as u",
  "s = u.find_spec('lsp')",
  "dirs = (s.submodule_search_locations or []) if s is not None else []",
  "missing = [] if any(os.path.isfile(os.path.join(d, 'server.py')) for d in dirs) else ['lsp.server']",
  `missing += [m for m in ${JSON.stringify(SERVER_PACKAGES)} if u.find_spec(m) is None]`,
  "print('missing: ' + ', '.join(missing) if missing else 'server')",
].join("\n");

/**
 * Probe `command` under `env`, in `cwd` (the server's working folder: `python -m` puts it
 * first on sys.path, so the probe looks where the server will).
 */
export function probe(command: string, env: NodeJS.ProcessEnv, timeoutMs = 20000, cwd?: string): Promise<ProbeResult> {
  return new Promise((resolve) => {
    execFile(
      command,
      ["-c", PROBE_SCRIPT],
      { env, cwd, timeout: timeoutMs, windowsHide: true },
      (error, stdout, stderr) => {
        const lines = stdout.trim().split(/\r?\n/);
        const version = lines[0] || undefined;
        if (error === null) {
          const answer = (lines[1] ?? "").trim();
          if (answer === "server") {
            resolve({ ok: true, runs: true, version });
          } else {
            const what = answer.startsWith("missing: ") ? answer.slice("missing: ".length) : answer || "no answer";
            resolve({ ok: false, runs: true, version, reason: `the language server is not installed there (missing ${what})` });
          }
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
          resolve({ ok: false, version, reason: `cannot be run (${last})` });
        }
      },
    );
  });
}
