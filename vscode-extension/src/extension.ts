/**
 * MoE-PolicyLang for VS Code: starts the project's language server (Python, pygls) and
 * restarts it when its settings change or on the "Restart server" command.
 */
import * as vscode from "vscode";
import { LanguageClient, LanguageClientOptions, RevealOutputChannelOn, ServerOptions } from "vscode-languageclient/node";

import { onInterpreterChange } from "./python";
import { chooseServer, hasBundledServer, isFailure } from "./server";
import { initializationOptions, readSettings, RESTART_SECTIONS } from "./settings";

const CLIENT_ID = "mpl";
const CLIENT_NAME = "MoE-PolicyLang";

let client: LanguageClient | undefined;
let log: vscode.LogOutputChannel;
/** Serialises start/stop so that quick successive restarts never overlap. */
let pending: Promise<void> = Promise.resolve();

function workspaceFolder(): vscode.WorkspaceFolder | undefined {
  const active = vscode.window.activeTextEditor?.document.uri;
  const folder = active !== undefined ? vscode.workspace.getWorkspaceFolder(active) : undefined;
  return folder ?? vscode.workspace.workspaceFolders?.[0];
}

async function stopClient(): Promise<void> {
  const old = client;
  client = undefined;
  if (old === undefined) {
    return;
  }
  try {
    await old.stop(5000);
  } catch (err) {
    log.warn(`stopping the server: ${String(err)}`);
  }
  await old.dispose();
}

async function notifyNoPython(message: string, context: vscode.ExtensionContext): Promise<void> {
  const open = "Open settings";
  const bundled = "Use bundled server";
  const showLog = "Show log";
  const settings = readSettings(vscode.workspace.getConfiguration("mpl"));
  const buttons = [open, showLog];
  if (settings.importStrategy === "fromEnvironment" && hasBundledServer(context)) {
    buttons.splice(1, 0, bundled);
  }
  const choice = await vscode.window.showErrorMessage(message, ...buttons);
  if (choice === open) {
    await vscode.commands.executeCommand("workbench.action.openSettings", "mpl.server");
  } else if (choice === bundled) {
    await vscode.workspace
      .getConfiguration("mpl")
      .update("server.importStrategy", "useBundled", vscode.ConfigurationTarget.Global);
  } else if (choice === showLog) {
    log.show();
  }
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const folder = workspaceFolder();
  const folderPath = folder?.uri.fsPath;
  const settings = readSettings(vscode.workspace.getConfiguration("mpl", folder?.uri));
  log.info(`import strategy: ${settings.importStrategy}`);
  const choice = await chooseServer(context, settings, folderPath, folder?.uri);
  if (isFailure(choice)) {
    log.error(choice.message);
    for (const line of choice.details) {
      log.error(`  tried ${line}`);
    }
    void notifyNoPython(choice.message, context);
    return;
  }
  log.info(`starting the language server: ${choice.description}`);
  const serverOptions: ServerOptions = { run: choice.executable, debug: choice.executable };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "moe" },
      { scheme: "untitled", language: "moe" },
    ],
    initializationOptions: initializationOptions(settings, folderPath),
    outputChannel: log,
    traceOutputChannel: log,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    synchronize: {
      // imported .moe files and model config.json changes re-check dependants
      fileEvents: vscode.workspace.createFileSystemWatcher("**/*.{moe,policy,json}"),
    },
  };
  const next = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
  client = next;
  try {
    await next.start();
    log.info("language server running");
  } catch (err) {
    log.error(`the language server failed to start: ${String(err)}`);
    void vscode.window
      .showErrorMessage(`MoE-PolicyLang: the language server failed to start (${String(err)}).`, "Show log")
      .then((c) => (c === "Show log" ? log.show() : undefined));
  }
}

/** Queue a (re)start after every earlier start/stop has finished. */
function restart(context: vscode.ExtensionContext, reason: string): Promise<void> {
  pending = pending
    .then(async () => {
      log.info(`(re)starting the language server: ${reason}`);
      await stopClient();
      await startClient(context);
    })
    .catch((err) => log.error(`restart failed: ${String(err)}`));
  return pending;
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  log = vscode.window.createOutputChannel(CLIENT_NAME, { log: true });
  context.subscriptions.push(log);
  context.subscriptions.push(
    vscode.commands.registerCommand("mpl.restartServer", () => restart(context, "restart command")),
    vscode.commands.registerCommand("mpl.showLog", () => log.show()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (RESTART_SECTIONS.some((s) => e.affectsConfiguration(s))) {
        void restart(context, "settings changed");
      }
    }),
  );
  const sub = await onInterpreterChange(() => {
    const s = readSettings(vscode.workspace.getConfiguration("mpl"));
    if (s.pythonPath === "") {
      void restart(context, "the Python extension's interpreter changed");
    }
  });
  if (sub !== undefined) {
    context.subscriptions.push(sub);
  }
  await restart(context, "activation");
}

export async function deactivate(): Promise<void> {
  await pending;
  await stopClient();
}
