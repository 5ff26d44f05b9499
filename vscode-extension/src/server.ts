/**
 * Choosing how to start the language server: which interpreter, which PYTHONPATH.
 */
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import { Executable } from "vscode-languageclient/node";

import { probe, ProbeResult, serverEnvironment } from "./probe";
import { candidates } from "./python";
import { ExtensionSettings, expandPath } from "./settings";

/** Where `npm run bundle-server` puts the vendored Python packages inside the extension. */
export function bundledLibs(context: vscode.ExtensionContext): string {
  return context.asAbsolutePath(path.join("server", "libs"));
}

export function hasBundledServer(context: vscode.ExtensionContext): boolean {
  return fs.existsSync(path.join(bundledLibs(context), "lsp", "server.py"));
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

/**
 * Find an interpreter that can import the server under the chosen import strategy and
 * return the executable to start; or say why none can.
 */
export async function chooseServer(
  context: vscode.ExtensionContext,
  settings: ExtensionSettings,
  workspaceFolder: string | undefined,
  resource?: vscode.Uri,
  settingFrom?: string,
): Promise<ServerChoice | ServerFailure> {
  const libs = bundledLibs(context);
  const bundled = hasBundledServer(context);
  if (settings.importStrategy === "useBundled" && !bundled) {
    return {
      message:
        "MoE-PolicyLang: this build of the extension has no bundled language server. " +
        'Set "mpl.server.importStrategy" to "fromEnvironment" and install it with ' +
        "`pip install \"mpl-policylang[lsp]\"`.",
      details: [`no server at ${libs}`],
    };
  }
  const configured = settings.pythonPath === "" ? "" : expandPath(settings.pythonPath, workspaceFolder);
  const cands = await candidates(configured, resource, settingFrom);
  const details: string[] = [];
  // `auto` tries the environment's server first, then (when the extension has one) the bundled
  // server with the same interpreters
  const order: ("fromEnvironment" | "useBundled")[] =
    settings.importStrategy === "auto" ? (bundled ? ["fromEnvironment", "useBundled"] : ["fromEnvironment"])
      : [settings.importStrategy];
  for (const strategy of order) {
    const env = serverEnvironment(strategy, libs);
    for (const cand of cands) {
      const result: ProbeResult = await probe(cand.command, env);
      if (result.ok) {
        const where = strategy === "useBundled" ? `bundled server (${libs})` : "server from the environment";
        const fellBack = settings.importStrategy === "auto" && strategy === "useBundled";
        return {
          executable: {
            command: cand.command,
            // stdio is the server's default transport: no `transport` option, so the client
            // appends no argument of its own.
            args: ["-m", "lsp.server"],
            options: { env, cwd: workspaceFolder },
          },
          description: `${cand.command} (Python ${result.version ?? "?"}, from ${cand.source}), ${where}`,
          summary: `${strategy === "useBundled" ? "bundled server" : "server from the environment"}, Python ${result.version ?? "?"}`,
          fallback: fellBack
            ? `the Python environment has no MoE-PolicyLang language server (${details.join("; ")}): ` +
              "using the server bundled with the extension. To use your own, " +
              '`pip install "mpl-policylang[lsp]"` there; "MoE-PolicyLang: Choose the language server" ' +
              "picks one for good."
            : undefined,
        };
      }
      const label = strategy === "useBundled" ? " with the bundled server" : " with the server from the environment";
      details.push(`${cand.command} (from ${cand.source})${label}: ${result.reason ?? "unusable"}`);
    }
  }
  const fix =
    settings.importStrategy === "fromEnvironment"
      ? 'Install the server into your Python environment (`pip install "mpl-policylang[lsp]"`), ' +
        'point "mpl.server.pythonPath" at an interpreter that has it, or choose the bundled server ' +
        '("MoE-PolicyLang: Choose the language server").'
      : 'Install Python 3.11 or newer, or point "mpl.server.pythonPath" at one.';
  return {
    message: `MoE-PolicyLang: no suitable Python found to run the language server. ${fix}`,
    details,
  };
}

export function isFailure(x: ServerChoice | ServerFailure): x is ServerFailure {
  return (x as ServerFailure).message !== undefined;
}
