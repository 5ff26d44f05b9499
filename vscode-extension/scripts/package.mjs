// Packages the extension: vsce package -> dist/moe-policylang.vsix, with README.md's relative
// links made absolute in the package: images to the repository's raw files, other links to
// its file pages (package.json's `repository`, in its `directory`).
//
// Why absolute: VS Code shows an extension's README in a webview that keeps an image only
// when its source is http: or https: (its sanitizer drops relative and data: sources, in VS
// Code and code-server alike; the webview's Content-Security-Policy then admits only https:),
// so `images/screenshot.png` was a broken image on the extension's page. vsce's own guess
// of the base URL leaves out `directory` (the extension is not at the repository's root),
// hence the explicit --baseImagesUrl / --baseContentUrl. An image needs the network to show
// there; README.md itself keeps the relative link, which the repository's web view renders.
//
// Usage: node scripts/package.mjs   (npm run package)
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const EXT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** The base URLs of the extension's folder in its repository: raw files (images) and file
 * pages (links), on the default branch. */
export function repositoryBases(pkg) {
  const url = String(pkg.repository?.url ?? "").replace(/^git\+/, "").replace(/\.git$/, "");
  if (!/^https:\/\/github\.com\/[^/]+\/[^/]+$/.test(url)) {
    throw new Error(`package.json repository.url is not a GitHub repository: ${pkg.repository?.url}`);
  }
  const dir = pkg.repository.directory ? `/${pkg.repository.directory.replace(/^\/+|\/+$/g, "")}` : "";
  return { images: `${url}/raw/HEAD${dir}`, content: `${url}/blob/HEAD${dir}` };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const pkg = JSON.parse(readFileSync(path.join(EXT, "package.json"), "utf-8"));
  const { images, content } = repositoryBases(pkg);
  const vsce = path.join(EXT, "node_modules", ".bin", "vsce");
  execFileSync(vsce, ["package", "--no-dependencies", "--baseImagesUrl", images, "--baseContentUrl", content,
    "--out", path.join("dist", "moe-policylang.vsix")], { cwd: EXT, stdio: "inherit" });
}
