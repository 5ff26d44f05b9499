// Builds the playground into playground/dist/ (a static site; git-ignored).
//
// Everything the page loads is packed here, at build time, from the checkout and the
// registries: the mpl wheel (built from this checkout with the C extension off: mpl's pure
// runtime is what runs in Pyodide), lark's wheel (PyPI), the Pyodide runtime (npm
// `pyodide`), the Oniguruma wasm (npm `vscode-oniguruma`), the VS Code extension's TextMate
// grammar (generated from mpl/schema.py), and the page's own scripts bundled by esbuild.
// At run time the page fetches only files of dist/.
//
// Usage: node scripts/build.mjs [--python PYTHON]   (playground/build.sh runs npm ci first)
import * as esbuild from "esbuild";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(path.dirname(fileURLToPath(import.meta.url)));   // playground/
const REPO = path.dirname(HERE);
const DIST = path.join(HERE, "dist");
const require = createRequire(import.meta.url);

/** lark's version: the one pure wheel mpl needs (pyproject.toml: lark>=1.2,<2). */
const LARK = "1.3.1";
/** The files of the npm `pyodide` package the page loads (no package of Pyodide's own). */
const PYODIDE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"];

const argv = process.argv.slice(2);
const pyIdx = argv.indexOf("--python");
const PYTHON = pyIdx >= 0 ? argv[pyIdx + 1] : process.env.PYTHON || "python3";

function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { stdio: ["ignore", "pipe", "inherit"], encoding: "utf-8", ...opts });
}

function pkgDir(name) {
  return path.dirname(require.resolve(`${name}/package.json`));
}

/**
 * What of pyproject.toml's [build-system] requires PYTHON lacks (empty when it has them all),
 * e.g. ["setuptools>=68 (has 65.5.0)", "wheel"]: a fresh virtual environment has pip and, on
 * Python 3.11, an old setuptools without `bdist_wheel`; on 3.12+, no setuptools at all.
 */
function missingBuildRequirements() {
  const script = `
import sys
if sys.version_info < (3, 11):
    sys.exit("playground build: Python %d.%d is too old (3.11 or newer is needed): PYTHON=... picks another" % sys.version_info[:2])
import tomllib
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:  # pip always carries a copy
    from pip._vendor.packaging.requirements import Requirement
with open(sys.argv[1], "rb") as f:
    requires = tomllib.load(f)["build-system"]["requires"]
for raw in requires:
    req = Requirement(raw)
    try:
        have = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        print(raw)
        continue
    if not req.specifier.contains(have, prereleases=True):
        print(f"{raw} (has {have})")
`;
  const out = run(PYTHON, ["-c", script, path.join(REPO, "pyproject.toml")]);
  return out.split("\n").map((l) => l.trim()).filter(Boolean);
}

/**
 * The mpl wheel, built from a clean copy of the checkout's package files. When PYTHON has the
 * build requirements, in it (offline); else pip installs them (from PyPI) into an isolated
 * build environment first, as `pip install .` does: any Python 3.11+ with pip builds it.
 */
function buildMplWheel(outDir) {
  const missing = missingBuildRequirements();
  const isolation = missing.length === 0 ? ["--no-build-isolation"] : [];
  if (missing.length > 0) {
    console.log(`  ${PYTHON} lacks the build requirements ${missing.join(", ")}: ` +
      "pip builds the mpl wheel in an isolated environment with them");
  }
  const tmp = mkdtempSync(path.join(tmpdir(), "mpl-playground-wheel-"));
  try {
    const src = path.join(tmp, "src");
    mkdirSync(src);
    for (const f of ["pyproject.toml", "setup.py", "README.md"]) {
      cpSync(path.join(REPO, f), path.join(src, f));
    }
    const skip = (p) => !/(__pycache__|\.so$|\.pyc$|\.pyd$)/.test(p);
    for (const d of ["mpl", "lsp", "stdlib"]) {
      cpSync(path.join(REPO, d), path.join(src, d), { recursive: true, filter: skip });
    }
    run(PYTHON, ["-m", "pip", "wheel", "--no-deps", ...isolation, "--quiet", "-w", outDir, src], {
      env: { ...process.env, MPL_NO_EXT: "1", PIP_DISABLE_PIP_VERSION_CHECK: "1" },
    });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  const wheel = readdirSync(outDir).find((f) => /^mpl_policylang-.*-py3-none-any\.whl$/.test(f));
  if (wheel === undefined) {
    throw new Error("pip wheel did not produce a pure mpl_policylang wheel");
  }
  return wheel;
}

/** lark's pure wheel from PyPI (cached in node_modules/.cache between builds). */
function fetchLark(outDir) {
  const cache = path.join(HERE, "node_modules", ".cache", "wheels");
  const name = `lark-${LARK}-py3-none-any.whl`;
  if (!existsSync(path.join(cache, name))) {
    mkdirSync(cache, { recursive: true });
    run(PYTHON, ["-m", "pip", "download", `lark==${LARK}`, "--no-deps", "--only-binary=:all:",
      "--python-version", "3.12", "--quiet", "-d", cache],
    { env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: "1" } });
  }
  cpSync(path.join(cache, name), path.join(outDir, name));
  return name;
}

async function main() {
  const t0 = Date.now();
  rmSync(DIST, { recursive: true, force: true });
  const wheels = path.join(DIST, "wheels");
  const assets = path.join(DIST, "assets");
  const pyodideOut = path.join(DIST, "pyodide");
  for (const d of [wheels, assets, pyodideOut]) {
    mkdirSync(d, { recursive: true });
  }

  const mplWheel = buildMplWheel(wheels);
  const larkWheel = fetchLark(wheels);

  const pyodide = pkgDir("pyodide");
  for (const f of PYODIDE_FILES) {
    cpSync(path.join(pyodide, f), path.join(pyodideOut, f));
  }
  cpSync(path.join(pkgDir("vscode-oniguruma"), "release", "onig.wasm"), path.join(assets, "onig.wasm"));
  cpSync(path.join(REPO, "vscode-extension", "syntaxes", "moe.tmLanguage.json"), path.join(assets, "moe.tmLanguage.json"));
  cpSync(path.join(HERE, "py", "mpl_playground.py"), path.join(assets, "mpl_playground.py"));
  for (const f of ["index.html", "style.css"]) {
    cpSync(path.join(HERE, "src", f), path.join(DIST, f));
  }

  let commit = "unknown";
  try {
    commit = run("git", ["-C", REPO, "rev-parse", "--short", "HEAD"]).trim();
    if (run("git", ["-C", REPO, "status", "--porcelain", "--", "mpl", "lsp", "stdlib", "playground"]).trim()) {
      commit += "+changes";
    }
  } catch {
    // not a git checkout: the manifest says "unknown"
  }
  const pyodideVersion = JSON.parse(readFileSync(path.join(pyodide, "package.json"), "utf-8")).version;
  const manifest = {
    wheels: [larkWheel, mplWheel],
    glue: "assets/mpl_playground.py",
    grammar: "assets/moe.tmLanguage.json",
    onig: "assets/onig.wasm",
    pyodide: pyodideVersion,
    commit,
  };
  writeFileSync(path.join(assets, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");

  await esbuild.build({
    entryPoints: { main: path.join(HERE, "src", "main.js"), worker: path.join(HERE, "src", "worker.js") },
    bundle: true,
    format: "esm",
    target: "es2022",
    outdir: DIST,
    minify: true,
    sourcemap: true,
    // the worker imports the Pyodide runtime from dist/pyodide/ at run time (not bundled)
    external: ["./pyodide/pyodide.mjs"],
    logLevel: "warning",
  });
  console.log(`playground built in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${path.relative(process.cwd(), DIST) || DIST}`);
  console.log(`  wheels: ${manifest.wheels.join(", ")}; Pyodide ${pyodideVersion}; commit ${commit}`);
}

main().catch((err) => {
  console.error(`playground build failed: ${err.message ?? err}`);
  process.exit(1);
});
