/**
 * MoE-PolicyLang for VS Code: starts the project's language server (Python, pygls) and
 * restarts it when its settings change or on the "Restart server" command.
 */
import * as vscode from "vscode";
import { LanguageClient, LanguageClientOptions, RevealOutputChannelOn, ServerOptions } from "vscode-languageclient/node";

import * as fs from "fs";

import { MplLanguageClient, registerFormatter } from "./format";
import { onInterpreterChange } from "./python";
import { chooseServer, hasBundledServer, isFailure } from "./server";
import { ImportStrategy, initializationOptions, readSettings, RESTART_SECTIONS, settingSource } from "./settings";
import { realFile, STDLIB_SCHEME, virtualPath } from "./stdlib";

const CLIENT_ID = "mpl";
const CLIENT_NAME = "MoE-PolicyLang";

const SELECT_COMMAND = "mpl.selectServer";
/** The documents the server serves (and the extension formats). */
const DOCUMENTS: { scheme: string; language: string }[] = [
  { scheme: "file", language: "moe" },
  { scheme: "untitled", language: "moe" },
];

let client: LanguageClient | undefined;
let log: vscode.LogOutputChannel;
/** The server's state next to the language mode of a .moe editor; its action picks a server. */
let status: vscode.LanguageStatusItem | undefined;
/** The bundled-server fallback is explained once a session, not at every restart. */
let toldFallback = false;
/** Serialises start/stop so that quick successive restarts never overlap. */
let pending: Promise<void> = Promise.resolve();
/** The running server's standard-library folder (its `mpl.status`), for read-only views. */
let stdlibDir: string | undefined;

/** A location in the stdlib folder becomes the read-only `mpl-std:` document of that file. */
function readOnlyUri(uri: vscode.Uri): vscode.Uri {
  if (uri.scheme !== "file") {
    return uri;
  }
  const v = virtualPath(uri.fsPath, stdlibDir);
  return v === undefined ? uri : vscode.Uri.from({ scheme: STDLIB_SCHEME, path: v });
}

type Found = vscode.Location | vscode.LocationLink;
function readOnlyLocations<T extends Found | Found[] | null | undefined>(found: T): T {
  const one = (x: Found): Found =>
    x instanceof vscode.Location
      ? new vscode.Location(readOnlyUri(x.uri), x.range)
      : { ...x, targetUri: readOnlyUri(x.targetUri) };
  if (found === null || found === undefined) {
    return found;
  }
  return (Array.isArray(found) ? found.map(one) : one(found)) as T;
}

/** The text of an `mpl-std:/NAME.moe` document: the stdlib file's, read-only. */
const stdlibProvider: vscode.TextDocumentContentProvider = {
  provideTextDocumentContent(uri: vscode.Uri): string {
    const file = realFile(uri.path, stdlibDir);
    if (file === undefined) {
      return `# ${uri.path}: not a standard-library policy (the language server is not running?)\n`;
    }
    try {
      return fs.readFileSync(file, "utf-8");
    } catch (err) {
      return `# ${file}: cannot be read (${String(err)})\n`;
    }
  },
};

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

function setStatus(text: string, detail: string, severity: vscode.LanguageStatusSeverity): void {
  if (status === undefined) {
    return;
  }
  status.text = text;
  status.detail = detail;
  status.severity = severity;
  status.command = { title: "Choose server…", command: SELECT_COMMAND };
}

/** Write a setting where it takes effect: the workspace when the workspace sets it, else User. */
async function updateSetting(key: string, value: unknown): Promise<void> {
  const config = vscode.workspace.getConfiguration("mpl");
  const values = config.inspect(key);
  const target =
    values?.workspaceFolderValue !== undefined || values?.workspaceValue !== undefined
      ? vscode.ConfigurationTarget.Workspace
      : vscode.ConfigurationTarget.Global;
  await config.update(key, value, target);
}

/** "MoE-PolicyLang: Choose the language server": the import strategy, or the interpreter. */
async function selectServer(context: vscode.ExtensionContext): Promise<void> {
  const current = readSettings(vscode.workspace.getConfiguration("mpl")).importStrategy;
  type Item = vscode.QuickPickItem & { strategy?: ImportStrategy; python?: true };
  const mark = (s: ImportStrategy): string => (s === current ? " (current)" : "");
  const items: Item[] = [
    { label: `Automatic${mark("auto")}`, strategy: "auto",
      detail: "The server installed in the Python environment when it has one, else the bundled one." },
    { label: `Bundled server${mark("useBundled")}`, strategy: "useBundled",
      detail: "The server shipped inside this extension; any Python 3.11 or newer runs it." },
    { label: `Server from the Python environment${mark("fromEnvironment")}`, strategy: "fromEnvironment",
      detail: 'Only the server installed with pip install "mpl-policylang[lsp]".' },
    { label: "Python interpreter…", python: true, detail: "Set mpl.server.pythonPath." },
  ];
  if (!hasBundledServer(context)) {
    items.splice(1, 1);
  }
  const pick = await vscode.window.showQuickPick(items, {
    title: "MoE-PolicyLang: language server",
    placeHolder: "Which language server to run",
  });
  if (pick?.strategy !== undefined) {
    await updateSetting("server.importStrategy", pick.strategy);
    if (pick.strategy === current) {
      await restart(context, "server chosen again");
    }
  } else if (pick?.python) {
    await vscode.commands.executeCommand("workbench.action.openSettings", "mpl.server.pythonPath");
  }
}

async function notifyNoPython(message: string, context: vscode.ExtensionContext): Promise<void> {
  const choose = "Choose server…";
  const open = "Open settings";
  const showLog = "Show log";
  const buttons = hasBundledServer(context) ? [choose, open, showLog] : [open, showLog];
  const choice = await vscode.window.showErrorMessage(message, ...buttons);
  if (choice === choose) {
    await selectServer(context);
  } else if (choice === open) {
    await vscode.commands.executeCommand("workbench.action.openSettings", "mpl.server");
  } else if (choice === showLog) {
    log.show();
  }
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const folder = workspaceFolder();
  const folderPath = folder?.uri.fsPath;
  const config = vscode.workspace.getConfiguration("mpl", folder?.uri);
  const settings = readSettings(config);
  log.info(`import strategy: ${settings.importStrategy}`);
  const from = settingSource(config.inspect("server.pythonPath"), vscode.env.remoteName !== undefined,
    vscode.workspace.workspaceFile !== undefined);
  const choice = await chooseServer(context, settings, folderPath, folder?.uri, from);
  if (isFailure(choice)) {
    log.error(choice.message);
    for (const line of choice.details) {
      log.error(`  tried ${line}`);
    }
    setStatus("no language server", choice.message, vscode.LanguageStatusSeverity.Error);
    void notifyNoPython(choice.message, context);
    return;
  }
  if (choice.fallback !== undefined && !toldFallback) {
    toldFallback = true;
    log.info(choice.fallback);
  }
  log.info(`starting the language server: ${choice.description}`);
  const serverOptions: ServerOptions = { run: choice.executable, debug: choice.executable };
  const clientOptions: LanguageClientOptions = {
    documentSelector: DOCUMENTS,
    initializationOptions: initializationOptions(settings, folderPath),
    outputChannel: log,
    traceOutputChannel: log,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    middleware: {
      // the standard library opens read-only (a virtual document), not as the extension's
      // bundled or the environment's installed file
      provideDefinition: async (document, position, token, next) =>
        readOnlyLocations(await next(document, position, token)),
      provideReferences: async (document, position, options, token, next) =>
        readOnlyLocations(await next(document, position, options, token)),
    },
    synchronize: {
      // imported .moe files and model config.json changes re-check dependants
      fileEvents: vscode.workspace.createFileSystemWatcher("**/*.{moe,policy,json}"),
    },
  };
  const next = new MplLanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
  client = next;
  try {
    await next.start();
    log.info("language server running");
    try {
      const st = await next.sendRequest<{ stdlib?: string | null }>("workspace/executeCommand",
        { command: "mpl.status", arguments: [] });
      stdlibDir = st?.stdlib ?? undefined;
    } catch (err) {
      stdlibDir = undefined;
      log.warn(`mpl.status: ${String(err)} (standard-library files open as plain files)`);
    }
    setStatus("mpl-lsp", choice.summary, vscode.LanguageStatusSeverity.Information);
  } catch (err) {
    log.error(`the language server failed to start: ${String(err)}`);
    setStatus("language server failed", String(err), vscode.LanguageStatusSeverity.Error);
    void vscode.window
      .showErrorMessage(`MoE-PolicyLang: the language server failed to start (${String(err)}).`, "Show log")
      .then((c) => (c === "Show log" ? log.show() : undefined));
  }
}

/** The running client once every (re)start queued so far has finished; undefined when the
 * server does not run (no Python could run it, or it failed to start). */
async function runningClient(): Promise<LanguageClient | undefined> {
  let seen: Promise<void> | undefined;
  while (seen !== pending) {
    seen = pending;
    await seen;
  }
  return client?.isRunning() ? client : undefined;
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
  // first, before anything is awaited: Format Document works (waits for the server) from now on
  context.subscriptions.push(registerFormatter(DOCUMENTS, runningClient, () => log.show()));
  status = vscode.languages.createLanguageStatusItem("mpl.server", { language: "moe" });
  status.name = "MoE-PolicyLang language server";
  setStatus("mpl-lsp", "starting", vscode.LanguageStatusSeverity.Information);
  context.subscriptions.push(status);
  context.subscriptions.push(vscode.workspace.registerTextDocumentContentProvider(STDLIB_SCHEME, stdlibProvider));
  context.subscriptions.push(
    vscode.commands.registerCommand("mpl.restartServer", () => restart(context, "restart command")),
    vscode.commands.registerCommand(SELECT_COMMAND, () => selectServer(context)),
    vscode.commands.registerCommand("mpl.showLog", () => log.show()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (RESTART_SECTIONS.some((s) => e.affectsConfiguration(s))) {
        void restart(context, "settings changed");
      }
    }),
  );
  // the start is queued before the Python extension is asked for its events, so that a
  // Format Document from now on waits for this start
  const started = restart(context, "activation");
  const sub = await onInterpreterChange(() => {
    const s = readSettings(vscode.workspace.getConfiguration("mpl"));
    if (s.pythonPath === "") {
      void restart(context, "the Python extension's interpreter changed");
    }
  });
  if (sub !== undefined) {
    context.subscriptions.push(sub);
  }
  await started;
}

export async function deactivate(): Promise<void> {
  await pending;
  await stopClient();
}
