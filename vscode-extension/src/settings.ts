/**
 * The extension's settings, read once per server start, and the initialization options the
 * language server receives: `{model, debounceMs, inlayHints: {defaults, perLayer},
 * importRoots}`, the names lsp/settings.py reads.
 */
import * as os from "os";
import * as path from "path";

/**
 * `auto` (the default): the server installed in the Python environment when it has one, else
 * the bundled one; `fromEnvironment` / `useBundled`: only that one.
 */
export type ImportStrategy = "auto" | "fromEnvironment" | "useBundled";
export const IMPORT_STRATEGIES: ImportStrategy[] = ["auto", "fromEnvironment", "useBundled"];

/** The subset of vscode.WorkspaceConfiguration this module needs (keeps it testable). */
export interface ConfigReader {
  get<T>(section: string): T | undefined;
}

/** What vscode.WorkspaceConfiguration.inspect() says about one setting. */
export interface SettingValues {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/**
 * Which settings tab a value comes from (for messages: "the mpl.server.pythonPath setting
 * (Workspace settings)"); in a remote window the user-level value is the local User or the
 * Remote settings.
 */
export function settingSource(values: SettingValues | undefined, remote: boolean, multiRoot = false): string {
  if (values?.workspaceFolderValue !== undefined) {
    // a single-folder workspace's settings are its folder's (the "Workspace" tab)
    return multiRoot ? "Folder settings" : "Workspace settings";
  }
  if (values?.workspaceValue !== undefined) {
    return "Workspace settings";
  }
  return remote ? "User or Remote settings" : "User settings";
}

export interface ExtensionSettings {
  importStrategy: ImportStrategy;
  pythonPath: string;
  model: string;
  importRoots: string[];
  debounceMs: number;
  inlayHints: { defaults: boolean; perLayer: boolean };
}

/** What the server gets as `initializationOptions`. */
export interface InitializationOptions {
  model: string | null;
  debounceMs: number;
  inlayHints: { defaults: boolean; perLayer: boolean };
  /** null: the server's default (the workspace folders) */
  importRoots: string[] | null;
}

export const DEFAULT_DEBOUNCE_MS = 200;
/** The largest debounce the server accepts (lsp/settings.py). */
export const MAX_DEBOUNCE_MS = 60000;

/** Settings whose change restarts the server. */
export const RESTART_SECTIONS = [
  "mpl.server",
  "mpl.model",
  "mpl.importRoots",
  "mpl.debounceMs",
  "mpl.inlayHints",
];

export function readSettings(config: ConfigReader): ExtensionSettings {
  const strategy = config.get<string>("server.importStrategy");
  const debounce = config.get<number>("debounceMs");
  const roots = config.get<unknown>("importRoots");
  return {
    importStrategy: IMPORT_STRATEGIES.includes(strategy as ImportStrategy) ? (strategy as ImportStrategy) : "auto",
    pythonPath: (config.get<string>("server.pythonPath") ?? "").trim(),
    model: (config.get<string>("model") ?? "").trim(),
    // a single string is one folder; non-strings and blanks are dropped
    importRoots: (typeof roots === "string" ? [roots] : Array.isArray(roots) ? roots : [])
      .filter((r): r is string => typeof r === "string" && r.trim() !== "")
      .map((r) => r.trim()),
    debounceMs:
      typeof debounce === "number" && Number.isFinite(debounce) && debounce >= 0
        ? Math.min(Math.round(debounce), MAX_DEBOUNCE_MS)
        : DEFAULT_DEBOUNCE_MS,
    inlayHints: {
      defaults: config.get<boolean>("inlayHints.defaults") ?? true,
      perLayer: config.get<boolean>("inlayHints.perLayer") ?? true,
    },
  };
}

/**
 * Expand `~`, `${workspaceFolder}`, `${userHome}` and `${env:NAME}` in a path setting;
 * a relative model path is resolved against the workspace folder.
 */
export function expandPath(value: string, workspaceFolder: string | undefined): string {
  let out = value.replace(/\$\{env:([^}]+)\}/g, (_m, name: string) => process.env[name] ?? "");
  out = out.replace(/\$\{userHome\}/g, os.homedir());
  if (workspaceFolder !== undefined) {
    out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  }
  if (out === "~" || out.startsWith("~/")) {
    out = path.join(os.homedir(), out.slice(1));
  }
  return out;
}

/** A folder setting: expanded, and a relative path resolved against the workspace folder. */
export function resolveFolder(value: string, workspaceFolder: string | undefined): string {
  const expanded = expandPath(value, workspaceFolder);
  if (!path.isAbsolute(expanded) && workspaceFolder !== undefined) {
    return path.join(workspaceFolder, expanded);
  }
  return expanded;
}

/** A model setting is a preset name or a path; only paths are expanded and resolved. */
export function resolveModel(model: string, workspaceFolder: string | undefined): string | null {
  if (model === "") {
    return null;
  }
  const looksLikePath = /[\\/]/.test(model) || model.endsWith(".json") || model.startsWith("~");
  if (!looksLikePath) {
    return model;
  }
  return resolveFolder(model, workspaceFolder);
}

export function initializationOptions(
  settings: ExtensionSettings,
  workspaceFolder: string | undefined,
): InitializationOptions {
  return {
    model: resolveModel(settings.model, workspaceFolder),
    debounceMs: settings.debounceMs,
    inlayHints: { ...settings.inlayHints },
    importRoots:
      settings.importRoots.length === 0 ? null : settings.importRoots.map((r) => resolveFolder(r, workspaceFolder)),
  };
}
