// Fails unless every scope the grammar can assign is asserted by at least one grammar test
// (test/grammar/*.moe, run by vscode-tmgrammar-test).
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

const grammar = JSON.parse(readFileSync("syntaxes/moe.tmLanguage.json", "utf8"));
const scopes = new Set();
(function walk(node) {
  if (Array.isArray(node)) {
    node.forEach(walk);
  } else if (node && typeof node === "object") {
    for (const [key, value] of Object.entries(node)) {
      if (key === "name" && typeof value === "string" && value.endsWith(".moe")) {
        scopes.add(value);
      } else {
        walk(value);
      }
    }
  }
})(grammar.repository);

const asserted = new Set();
const dir = "test/grammar";
for (const file of readdirSync(dir).filter((f) => f.endsWith(".moe"))) {
  for (const line of readFileSync(join(dir, file), "utf8").split(/\r?\n/)) {
    const m = /^#\s*(?:\^+|<[~]*-+)\s+(.*)$/.exec(line);
    if (m) {
      for (const s of m[1].split(/\s+/)) {
        if (s === "-") break; // negative assertions do not count as coverage
        asserted.add(s);
      }
    }
  }
}
const missing = [...scopes].filter((s) => !asserted.has(s)).sort();
if (missing.length > 0) {
  console.error(`grammar scopes without a test in ${dir}/:\n  ${missing.join("\n  ")}`);
  process.exit(1);
}
console.log(`scope coverage: all ${scopes.size} grammar scopes are asserted by ${dir}/*.moe`);
