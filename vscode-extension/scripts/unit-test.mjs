// Bundle test/unit/*.test.ts with esbuild (vscode-free modules only) and run them with
// node's test runner.
import * as esbuild from "esbuild";
import { readdirSync, rmSync } from "node:fs";
import { spawnSync } from "node:child_process";

const files = readdirSync("test/unit").filter((f) => f.endsWith(".test.ts")).map((f) => `test/unit/${f}`);
rmSync("out/unit", { recursive: true, force: true });
await esbuild.build({
  entryPoints: files,
  bundle: true,
  outdir: "out/unit",
  platform: "node",
  format: "cjs",
  target: "node18",
  external: ["vscode"],
  logLevel: "warning",
});
const outs = files.map((f) => f.replace(/^test\/unit\//, "out/unit/").replace(/\.ts$/, ".js"));
const r = spawnSync(process.execPath, ["--test", ...outs], { stdio: "inherit" });
process.exit(r.status ?? 1);
