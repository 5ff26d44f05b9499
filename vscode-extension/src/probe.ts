/**
 * The probe that decides whether an interpreter can run the language server: Python >= 3.11
 * and `import lsp.server` under the environment the server will get. No vscode import, so
 * the unit tests run it against real interpreters.
 */
import { execFile } from "child_process";
import * as path from "path";

export const MIN_PYTHON: [number, number] = [3, 11];

export interface ProbeResult {
  ok: boolean;
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
