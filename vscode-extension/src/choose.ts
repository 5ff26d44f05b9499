/**
 * Choosing the interpreter and the server from the candidates: each is probed under each
 * environment the import strategy allows, the first that passes is started; when none
 * passes, the message says why in words that name the fix. No vscode import: the unit tests
 * run it against real processes.
 */
import type { Executable } from "vscode-languageclient/node";

import { probe as realProbe, ProbeResult, serverEnvironment } from "./probe";
import type { ImportStrategy } from "./settings";

export interface Candidate {
  /** Interpreter command or path. */
  command: string;
  /** Where it came from, for messages. */
  source: string;
  /** Set for the `mpl.server.pythonPath` candidate: the value as written and its settings tab. */
  setting?: { value: string; scope: string };
}

export interface ServerChoice {
  executable: Executable;
  /** A line for the log: which interpreter and which server. */
  description: string;
  /** Short form for the language status item ("bundled server, Python 3.11.7"). */
  summary: string;
  /** Set when `auto` fell back to the bundled server: why (the environment has none). */
  fallback?: string;
}

export interface ServerFailure {
  /** The user-facing message (names the fix). */
  message: string;
  /** One line per candidate tried, for the log. */
  details: string[];
}

export type Probe = (command: string, env: NodeJS.ProcessEnv) => Promise<ProbeResult>;

const INSTALL = '`pip install "mpl-policylang[lsp]"`';

/**
 * The message when no candidate passed. A configured `mpl.server.pythonPath` is the only
 * candidate: the message names its value, the settings tab that set it (User, Workspace,
 * Folder, Remote) and why it failed, instead of a generic "install Python".
 */
export function failureMessage(
  strategy: ImportStrategy,
  cands: Candidate[],
  results: Map<string, ProbeResult>,
  bundled: boolean,
): string {
  const head = "MoE-PolicyLang: no suitable Python found to run the language server.";
  const configured = cands.find((c) => c.setting !== undefined);
  if (configured?.setting !== undefined) {
    const { value, scope } = configured.setting;
    const r = results.get(configured.command);
    const why = r?.reason ?? "unusable";
    const expanded = configured.command !== value ? ` (expanded to "${configured.command}")` : "";
    let fix = `Point mpl.server.pythonPath in ${scope} at a Python 3.11 or newer, or clear it to use python3 from PATH.`;
    if (r?.reason?.startsWith("cannot import") && strategy === "fromEnvironment") {
      fix = `Install the server into that environment (${INSTALL}), point mpl.server.pythonPath in ${scope} at ` +
        "an interpreter that has it, or choose the bundled server (\"MoE-PolicyLang: Choose the language server\").";
    }
    return `${head} The interpreter "${value}"${expanded}, set by mpl.server.pythonPath in ${scope}, ${why === "not found" ? "was not found" : `cannot be used: ${why}`}. ${fix}`;
  }
  const fix =
    strategy === "fromEnvironment"
      ? `Install the server into your Python environment (${INSTALL}), ` +
        'point "mpl.server.pythonPath" at an interpreter that has it, or choose the bundled server ' +
        '("MoE-PolicyLang: Choose the language server").'
      : bundled
        ? 'Install Python 3.11 or newer, or point "mpl.server.pythonPath" at one.'
        : `Install the server (${INSTALL}) into a Python 3.11 or newer, or point "mpl.server.pythonPath" at one that has it.`;
  return `${head} ${fix}`;
}

/**
 * The first candidate that can import the server under the import strategy (`auto`: each
 * with its own environment first, then each with the bundled libraries), or the failure.
 */
export async function chooseFrom(
  cands: Candidate[],
  strategy: ImportStrategy,
  libs: string,
  bundled: boolean,
  workspaceFolder: string | undefined,
  probe: Probe = realProbe,
): Promise<ServerChoice | ServerFailure> {
  const details: string[] = [];
  const results = new Map<string, ProbeResult>();
  const order: ("fromEnvironment" | "useBundled")[] =
    strategy === "auto" ? (bundled ? ["fromEnvironment", "useBundled"] : ["fromEnvironment"]) : [strategy];
  for (const s of order) {
    const env = serverEnvironment(s, libs);
    for (const cand of cands) {
      const result = await probe(cand.command, env);
      if (result.ok) {
        const where = s === "useBundled" ? `bundled server (${libs})` : "server from the environment";
        const fellBack = strategy === "auto" && s === "useBundled";
        return {
          executable: {
            command: cand.command,
            // stdio is the server's default transport: no `transport` option, so the client
            // appends no argument of its own.
            args: ["-m", "lsp.server"],
            options: { env, cwd: workspaceFolder },
          },
          description: `${cand.command} (Python ${result.version ?? "?"}, from ${cand.source}), ${where}`,
          summary: `${s === "useBundled" ? "bundled server" : "server from the environment"}, Python ${result.version ?? "?"}`,
          fallback: fellBack
            ? `the Python environment has no MoE-PolicyLang language server (${details.join("; ")}): ` +
              `using the server bundled with the extension. To use your own, ${INSTALL} there; ` +
              '"MoE-PolicyLang: Choose the language server" picks one for good.'
            : undefined,
        };
      }
      // a missing or too old interpreter fails the same way under every environment: keep
      // the first reason (the later, bundled try would only repeat it)
      if (!results.has(cand.command) || !result.reason?.startsWith("cannot import")) {
        results.set(cand.command, result);
      }
      const label = s === "useBundled" ? " with the bundled server" : " with the server from the environment";
      details.push(`${cand.command} (from ${cand.source})${label}: ${result.reason ?? "unusable"}`);
    }
  }
  return { message: failureMessage(strategy, cands, results, bundled), details };
}

export function isFailure(x: ServerChoice | ServerFailure): x is ServerFailure {
  return (x as ServerFailure).message !== undefined;
}
