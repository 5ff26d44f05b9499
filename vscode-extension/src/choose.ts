/**
 * Choosing the interpreter and the server from the candidates: each is probed once (one
 * short process: its version, and whether its environment has the server), the first that
 * passes is started; when none passes, the message says why in words that name the fix. No
 * vscode import: the unit tests run it against real processes.
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

export type Probe = (command: string, env: NodeJS.ProcessEnv, timeoutMs?: number, cwd?: string) => Promise<ProbeResult>;

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
    if (r?.runs && strategy === "fromEnvironment") {
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
 * The first candidate whose environment has the server (`auto`, `fromEnvironment`) or that
 * runs the bundled one (`useBundled`); under `auto`, when none has it, the first that runs,
 * with the bundled server. Each candidate is probed once, in the environment it is tried
 * with first (its own, or the bundled one's for `useBundled`): that one probe says both
 * whether it has the server and whether it runs at all.
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
  const first: "fromEnvironment" | "useBundled" = strategy === "useBundled" ? "useBundled" : "fromEnvironment";
  const label = first === "useBundled" ? " with the bundled server" : " with the server from the environment";
  const choose = (cand: Candidate, s: "fromEnvironment" | "useBundled", result: ProbeResult): ServerChoice => {
    const where = s === "useBundled" ? `bundled server (${libs})` : "server from the environment";
    const fellBack = strategy === "auto" && s === "useBundled";
    return {
      executable: {
        command: cand.command,
        // stdio is the server's default transport: no `transport` option, so the client
        // appends no argument of its own.
        args: ["-m", "lsp.server"],
        options: { env: serverEnvironment(s, libs), cwd: workspaceFolder },
      },
      description: `${cand.command} (Python ${result.version ?? "?"}, from ${cand.source}), ${where}`,
      summary: `${s === "useBundled" ? "bundled server" : "server from the environment"}, Python ${result.version ?? "?"}`,
      fallback: fellBack
        ? `the Python environment has no MoE-PolicyLang language server (${details.join("; ")}): ` +
          `using the server bundled with the extension. To use your own, ${INSTALL} there; ` +
          '"MoE-PolicyLang: Choose the language server" picks one for good.'
        : undefined,
    };
  };
  const env = serverEnvironment(first, libs);
  for (const cand of cands) {
    const result = await probe(cand.command, env, undefined, workspaceFolder);
    results.set(cand.command, result);
    if (result.ok) {
      return choose(cand, first, result);
    }
    details.push(`${cand.command} (from ${cand.source})${label}: ${result.reason ?? "unusable"}`);
  }
  if (strategy === "auto" && bundled) {
    // the bundled server needs only a Python that runs and is new enough: no second probe
    const runs = cands.find((c) => results.get(c.command)?.runs === true);
    if (runs !== undefined) {
      return choose(runs, "useBundled", results.get(runs.command) as ProbeResult);
    }
  }
  return { message: failureMessage(strategy, cands, results, bundled), details };
}

export function isFailure(x: ServerChoice | ServerFailure): x is ServerFailure {
  return (x as ServerFailure).message !== undefined;
}
