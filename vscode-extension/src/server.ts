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
): Promise<ServerChoice | ServerFailure> {
  const libs = bundledLibs(context);
  if (settings.importStrategy === "useBundled" && !hasBundledServer(context)) {
    return {
      message:
        "MoE-PolicyLang: this build of the extension has no bundled language server. " +
        'Set "mpl.server.importStrategy" to "fromEnvironment" and install it with ' +
        "`pip install \"mpl-policylang[lsp]\"`.",
      details: [`no server at ${libs}`],
    };
  }
  const env = serverEnvironment(settings.importStrategy, libs);
  const configured = settings.pythonPath === "" ? "" : expandPath(settings.pythonPath, workspaceFolder);
  const details: string[] = [];
  for (const cand of await candidates(configured, resource)) {
    const result: ProbeResult = await probe(cand.command, env);
    if (result.ok) {
      const where = settings.importStrategy === "useBundled" ? `bundled server (${libs})` : "server from the environment";
      return {
        executable: {
          command: cand.command,
          // stdio is the server's default transport: no `transport` option, so the client
          // appends no argument of its own.
          args: ["-m", "lsp.server"],
          options: { env, cwd: workspaceFolder },
        },
        description: `${cand.command} (Python ${result.version ?? "?"}, from ${cand.source}), ${where}`,
      };
    }
    details.push(`${cand.command} (from ${cand.source}): ${result.reason ?? "unusable"}`);
  }
  const fix =
    settings.importStrategy === "useBundled"
      ? "Install Python 3.11 or newer, or point \"mpl.server.pythonPath\" at one."
      : 'Install the server into your Python environment (`pip install "mpl-policylang[lsp]"`), ' +
        'point "mpl.server.pythonPath" at an interpreter that has it, or set ' +
        '"mpl.server.importStrategy" to "useBundled".';
  return {
    message: `MoE-PolicyLang: no suitable Python found to run the language server. ${fix}`,
    details,
  };
}

export function isFailure(x: ServerChoice | ServerFailure): x is ServerFailure {
  return (x as ServerFailure).message !== undefined;
}
