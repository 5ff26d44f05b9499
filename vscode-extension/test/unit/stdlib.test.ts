// Standard-library files map to read-only virtual documents and back; nothing outside the
// stdlib folder (or a path that climbs out of it) maps.
import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";

import { realFile, virtualPath } from "../../src/stdlib";

const STD = path.join(path.sep, "opt", "ext", "server", "libs", "mpl", "stdlib");

void test("a stdlib file becomes /NAME.moe and back", () => {
  assert.equal(virtualPath(path.join(STD, "balanced.moe"), STD), "/balanced.moe");
  assert.equal(realFile("/balanced.moe", STD), path.join(STD, "balanced.moe"));
  assert.equal(virtualPath(path.join(STD, "old.policy"), STD), "/old.policy");
});

void test("files outside the stdlib folder stay files", () => {
  assert.equal(virtualPath(path.join(path.sep, "home", "me", "balanced.moe"), STD), undefined);
  assert.equal(virtualPath(path.join(STD, "sub", "x.moe"), STD), undefined);
  assert.equal(virtualPath(path.join(STD, "..", "x.moe"), STD), undefined);
  assert.equal(virtualPath(path.join(STD, "notes.txt"), STD), undefined);
  assert.equal(virtualPath(path.join(STD, "balanced.moe"), undefined), undefined);
});

void test("a virtual path never reads outside the stdlib folder", () => {
  assert.equal(realFile("/../../etc/passwd", STD), undefined);
  assert.equal(realFile("/sub/x.moe", STD), undefined);
  assert.equal(realFile("/x.moe", undefined), undefined);
});
