// ci.sh with a Python that has the repository installed without its `lsp` extra (what
// `pip install -e .` gives): it stops at once with a message naming the extra and the
// command that installs it, not with a traceback from the bundling step minutes later.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

const PYTHON = process.env.MPL_TEST_PYTHON ?? "python3";
const EXT = path.resolve(__dirname, "..", "..");     // out/unit/ -> vscode-extension/
const ROOT = path.dirname(EXT);

/** Write the installed-package metadata pip would leave for the repository (its
 *  pyproject.toml's requirements, extras included) and for lark, its one base dependency. */
const FAKE_INSTALL = `
import pathlib, sys, tomllib
root, site = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
proj = tomllib.loads((root / "pyproject.toml").read_text())["project"]
lines = ["Metadata-Version: 2.1", f"Name: {proj['name']}", f"Version: {proj['version']}"]
lines += [f"Requires-Dist: {r}" for r in proj["dependencies"]]
for extra, reqs in proj["optional-dependencies"].items():
    lines.append(f"Provides-Extra: {extra}")
    lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
for name, version, text in [("mpl_policylang", proj["version"], "\\n".join(lines)),
                            ("lark", "1.3.1", "Metadata-Version: 2.1\\nName: lark\\nVersion: 1.3.1")]:
    d = site / f"{name}-{version}.dist-info"
    d.mkdir()
    (d / "METADATA").write_text(text + "\\n")
`;

void test("ci.sh without the lsp extra: one line naming the extra and the fix, exit 1, no traceback", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mpl-ci-"));
  try {
    const venv = path.join(dir, "venv");
    execFileSync(PYTHON, ["-m", "venv", venv]);
    const py = path.join(venv, "bin", "python");
    const site = execFileSync(py, ["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], { encoding: "utf-8" }).trim();
    execFileSync(py, ["-c", FAKE_INSTALL, ROOT, site]);
    // an npm that refuses: were the check gone, ci.sh would otherwise reinstall this
    // folder's node_modules under the running tests
    const bin = path.join(dir, "bin");
    fs.mkdirSync(bin);
    fs.writeFileSync(path.join(bin, "npm"), "#!/bin/sh\necho 'npm run by the test of ci.sh' >&2\nexit 99\n", { mode: 0o755 });
    const env = { ...process.env, PYTHON: py, PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}` };
    const r = spawnSync("bash", [path.join(EXT, "ci.sh")], { env, encoding: "utf-8" });
    const out = `${r.stdout}${r.stderr}`;
    assert.equal(r.status, 1, out);
    assert.ok(out.includes(`pygls (required by mpl-policylang[lsp]) is not installed in ${py}.`), out);
    assert.ok(out.includes(`The language server's dependencies come with the \`lsp\` extra: \`pip install -e "${ROOT}[lsp]"\``), out);
    assert.ok(!out.includes("Traceback"), out);
    assert.ok(!out.includes("== npm ci"), `ci.sh went on past the check:\n${out}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
