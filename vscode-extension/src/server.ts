/**
 * Choosing how to start the language server: which interpreter, which PYTHONPATH.
 */
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";

import { chooseFrom, ServerChoice, ServerFailure } from "./choose";
import { candidates } from "./python";
import { ExtensionSettings, expandPath } from "./settings";

/** Where `npm run bundle-server` puts the vendored Python packages inside the extension. */
export function bundledLibs(context: vscode.ExtensionContext): string {
  return context.asAbsolutePath(path.join("server", "libs"));
}

export function hasBundledServer(context: vscode.ExtensionContext): boolean {
  return fs.existsSync(path.join(bundledLibs(context), "lsp", "server.py"));
}

export type { ServerChoice, ServerFailure } from "./choose";
export { isFailure } from "./choose";

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
  const cands = await candidates(configured, resource, settingFrom, settings.pythonPath);
  return chooseFrom(cands, settings.importStrategy, libs, bundled, workspaceFolder);
}
