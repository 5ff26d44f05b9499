// Bundle the extension with esbuild into dist/extension.js (vscode stays external).
import * as esbuild from "esbuild";

const dev = process.argv.includes("--dev");
await esbuild.build({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  outfile: "dist/extension.js",
  external: ["vscode"],
  format: "cjs",
  platform: "node",
  target: "node18",
  sourcemap: dev,
  minify: !dev,
  logLevel: "info",
});
