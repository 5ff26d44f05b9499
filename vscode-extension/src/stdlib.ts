/**
 * Standard-library policies open read-only: Go to Definition (or Find References) that lands
 * in the server's stdlib folder is redirected to a virtual document, `mpl-std:/NAME.moe`,
 * whose text a TextDocumentContentProvider reads from that folder. VS Code shows such a
 * document read-only (no stray key can be saved into the extension's bundled copy, auto-save
 * or not), highlighted as `.moe`. No vscode import here: unit-tested.
 */
import * as path from "path";

export const STDLIB_SCHEME = "mpl-std";

const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*\.(moe|policy)$/;

function inside(file: string, dir: string): boolean {
  const rel = path.relative(path.resolve(dir), path.resolve(file));
  return rel !== "" && !rel.startsWith("..") && !path.isAbsolute(rel) && !rel.includes(path.sep);
}

/** The virtual document's path for a file of the stdlib folder (`/NAME.moe`), else undefined. */
export function virtualPath(fsPath: string, stdlibDir: string | undefined): string | undefined {
  if (stdlibDir === undefined || !inside(fsPath, stdlibDir)) {
    return undefined;
  }
  const base = path.basename(fsPath);
  return NAME.test(base) ? `/${base}` : undefined;
}

/** The file a virtual document shows: a plain file name in the stdlib folder, else undefined. */
export function realFile(virtual: string, stdlibDir: string | undefined): string | undefined {
  const base = virtual.replace(/^\/+/, "");
  if (stdlibDir === undefined || !NAME.test(base)) {
    return undefined;
  }
  return path.join(stdlibDir, base);
}
