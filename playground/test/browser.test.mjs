// The playground in a real browser: Debian's Chromium, headless, driven by playwright-core,
// over the built site (playground/dist/, served on 127.0.0.1). What a user does, checked
// against what the command line says for the same input:
//   - the page starts (Pyodide, mpl's pure runtime) and loads nothing from outside 127.0.0.1;
//     until it is ready, Replay, Format, Share and the examples are disabled;
//   - the grammar colours the policy (the extension's TextMate scopes);
//   - the default policy's eviction rule matters: another rule gives another hit rate, each
//     equal to `mplc replay --json` of that policy on the default trace;
//   - typing an error squiggles exactly its range, the tooltip and the Problems list show
//     the code and message `mplc check --format json` gives, and its quick fix repairs it;
//   - hover on a parameter shows the schema's doc (the language server's hover text);
//   - Format gives `mplc fmt -` byte for byte; a text with syntax errors is refused, saying why;
//   - Replay on a synthetic trace shows the numbers of `mplc trace synth` + `mplc replay --json`
//     (hit rate, Belady, gap, tokens/s, time per step, accesses, loads, evictions), and the
//     plot's points equal `mplc sweep --capacity ... --json`; a failed replay then clears
//     those numbers and the plot;
//   - a dropped .mpltrace and .jsonl replay to `mplc replay --json` of those files;
//   - a share link reopens with the same policy and trace settings; a damaged one says so,
//     and the notice stays once the page is ready;
//   - at 420 and 768 px wide the page does not scroll sideways.
// Screenshots go to playground/test/screenshots/ (git-ignored). Prints "N passed, N failed".
//
// Usage: node test/browser.test.mjs   (after the build; CHROMIUM=/path, PYTHON=python3)
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

import { serve } from "../scripts/serve.mjs";

const HERE = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const REPO = path.dirname(HERE);
const SHOTS = path.join(HERE, "test", "screenshots");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const PYTHON = process.env.PYTHON || "python3";
const CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

const TRACE = { preset: "deepseek-v2-lite", steps: "48", seed: "7", hardware: "rtx-5080" };
const REPLAY_POLICY = `policy trial {
    cache {
        capacity = 12
        eviction = lfu
    }
    per_layer {
        allocation = frequency
    }
}
`;
const MESSY = "# keep this comment\npolicy   tidy{cache{capacity=8 ; eviction=lru}   prefetch{strategy=history}}\n";

const tmp = mkdtempSync(path.join(tmpdir(), "mpl-playground-test-"));
const env = { ...process.env, PYTHONPATH: [REPO, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter) };

function mplc(args, input) {
  return execFileSync(PYTHON, ["-m", "mpl.cli.main", ...args], { env, cwd: tmp, input, encoding: "utf-8",
    stdio: ["pipe", "pipe", "pipe"] });
}
function mplcJson(args) {
  return JSON.parse(mplc(args));
}
function mplcStatus(args, input) {
  try {
    return { code: 0, out: mplc(args, input) };
  } catch (e) {
    return { code: e.status, out: String(e.stdout), err: String(e.stderr) };
  }
}
function pyEval(expr) {
  return JSON.parse(execFileSync(PYTHON, ["-c", `import json, mpl.schema as schema; print(json.dumps(${expr}))`],
    { env, encoding: "utf-8" }));
}

let passed = 0;
let failed = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } catch (err) {
    failed++;
    console.log(`FAIL ${name}: ${err.stack ?? err}`);
    await shot(`FAIL-${name.replace(/\W+/g, "-")}`).catch(() => {});
  }
}
function eq(actual, expected, what) {
  if (JSON.stringify(actual) !== JSON.stringify(expected)) {
    throw new Error(`${what}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
  }
}
function ok(cond, what) {
  if (!cond) {
    throw new Error(what);
  }
}

let page;
/** The editor's text on a page opened without a share link. */
let defaultPolicy;
async function shot(name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

const editorText = () => page.evaluate(() => window.playground.view.state.doc.toString());

/** Replace the editor's text as a paste does (select all, then the text as one input:
 * no auto-indent or auto-closed brackets in between). */
async function pasteText(text) {
  await page.click(".cm-content");
  await page.keyboard.press("Control+A");
  await page.keyboard.press("Delete");
  await page.keyboard.insertText(text);
  eq(await editorText(), text, "the editor's text after the paste");
}

async function checked(after) {
  await page.waitForFunction((n) => Number(document.body.dataset.checked) > n, after, { timeout: 30000 });
}

/** Click Replay and wait for this replay's end: true when it succeeded, false when it failed. */
async function replayOnce() {
  const [n, e] = await page.evaluate(() => [Number(document.body.dataset.replays ?? 0), Number(document.body.dataset.replayErrors ?? 0)]);
  await page.click("#replay");
  await page.waitForFunction(([n, e]) => Number(document.body.dataset.replays ?? 0) > n || Number(document.body.dataset.replayErrors ?? 0) > e,
    [n, e], { timeout: 240000 });
  return Number(await page.evaluate(() => document.body.dataset.replays ?? 0)) > n;
}

const RESULT_CELLS = ["r-hit-rate", "r-belady", "r-gap", "r-tokens", "r-step", "r-accesses", "r-loads", "r-evictions", "r-prefetch"];

async function main() {
  rmSync(SHOTS, { recursive: true, force: true });
  mkdirSync(SHOTS, { recursive: true });
  const server = await serve(path.join(HERE, "dist"));
  const base = `http://127.0.0.1:${server.address().port}/`;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS, headless: true });
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const outside = [];
  // the first load's grammar is held back until the test lets it through: a page that is
  // certainly not ready yet
  let releaseGrammar;
  const grammarHeld = new Promise((resolve) => {
    releaseGrammar = resolve;
  });
  await context.route("**/*", async (route) => {
    const u = new URL(route.request().url());
    if (u.hostname !== "127.0.0.1" && u.protocol !== "data:" && u.protocol !== "blob:") {
      outside.push(u.href);
      return route.abort();
    }
    if (u.pathname.endsWith("/assets/moe.tmLanguage.json")) {
      await grammarHeld;
    }
    return route.continue();
  });
  page = await context.newPage();
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error") {
      pageErrors.push(m.text());
    }
  });

  try {
    await check("the page starts: mpl on Pyodide, pure runtime, nothing from outside; its controls wait for it", async () => {
      const t0 = Date.now();
      await page.goto(base, { waitUntil: "domcontentloaded" });
      const controls = () => page.$$eval("#share, #examples, #format, #replay", (l) => l.map((e) => [e.id, e.disabled]));
      try {
        await page.waitForFunction(() => document.getElementById("status").textContent.includes("loading Python"), null, { timeout: 30000 });
        eq(await controls(), [["share", true], ["examples", true], ["format", true], ["replay", true]],
          "the controls while the page loads (the grammar held back)");
        eq(await page.evaluate(() => document.body.dataset.ready), undefined, "ready while the grammar is held back");
        await shot("00-loading");
      } finally {
        releaseGrammar();     // the checks after this one need a started page
        await page.waitForFunction(() => document.body.dataset.ready !== undefined, null, { timeout: 180000 });
      }
      eq(await page.evaluate(() => document.body.dataset.ready), "true", "ready");
      const info = await page.evaluate(() => window.playground.info);
      eq(info.backend, "pure", "runtime backend");
      eq(info.platform, "emscripten", "Python platform");
      ok((await page.textContent("#status")).includes("pure runtime"), "status line");
      await checked(0);
      eq(await page.$$eval(".problem", (l) => l.length), 0, "problems of the default policy");
      eq(await controls(), [["share", false], ["examples", false], ["format", false], ["replay", false]], "the controls once ready");
      eq(await page.isHidden("#notice"), true, "a notice without a share link");
      defaultPolicy = await editorText();
      console.log(`     started in ${((Date.now() - t0) / 1000).toFixed(1)} s: mpl ${info.mpl}, Python ${info.python}, Pyodide ${info.pyodide}`);
      await shot("01-start");
    });

    await check("the grammar colours the policy", async () => {
      const cls = async (word) => page.$$eval(".cm-line span", (spans, w) =>
        spans.filter((s) => s.textContent === w).map((s) => s.className), word);
      ok((await cls("policy")).some((c) => c.includes("tok-definitionKeyword")), "policy keyword");
      ok((await cls("capacity")).some((c) => c.includes("tok-propertyName")), "parameter");
      ok((await cls("lru")).some((c) => c.includes("tok-atom")), "enum value");
      ok((await cls("cache")).some((c) => c.includes("tok-namespace")), "block name");
    });

    await check("the default policy: its eviction rule decides the hit rate (each as mplc replays it)", async () => {
      const dflt = await editorText();
      ok(/^\s*eviction = lru$/m.test(dflt), `the default policy's eviction: ${dflt}`);
      const preset = await page.inputValue("#preset");
      const [steps, seed, hw] = [await page.inputValue("#steps"), await page.inputValue("#seed"), await page.inputValue("#hardware")];
      mplc(["trace", "synth", "--preset", preset, "--steps", steps, "--seed", seed, "-o", "default.mpltrace"]);
      const rates = {};
      for (const rule of ["lru", "lfu", "farthest_layer"]) {
        const text = dflt.replace(/eviction = lru$/m, `eviction = ${rule}`);
        if (rule !== "lru") {
          await pasteText(text);
        }
        ok(await replayOnce(), `the replay with ${rule}: ${await page.textContent("#replay-status")}`);
        rates[rule] = Number(await page.getAttribute("#r-hit-rate", "data-raw"));
        writeFileSync(path.join(tmp, "default.moe"), text);
        const e = mplcJson(["replay", "default.moe", "--trace", "default.mpltrace", "--hardware", hw, "--json", "--no-progress"]);
        eq(rates[rule], e.stats.hit_rate, `${rule}: hit rate (mplc replay)`);
        ok(e.stats.evictions > 0, `${rule}: the cache holds every expert of the trace (no eviction)`);
        if (rule === "lru") {
          await shot("01b-default-replay");
        }
      }
      console.log(`     default policy on ${preset}: ${Object.entries(rates).map(([k, v]) => `${k} ${(100 * v).toFixed(1)} %`).join(", ")}`);
      eq(new Set(Object.values(rates)).size, 3, `three rules, three hit rates: ${JSON.stringify(rates)}`);
    });

    await check("an error is squiggled, explained and fixed", async () => {
      const before = Number(await page.evaluate(() => document.body.dataset.checked));
      const good = "policy p {\n    cache {\n        capacity = 8\n        eviction = lru\n    }\n}\n";
      const text = good.replace("capacity", "capcity");
      await pasteText(good);
      await checked(before);
      // a typing mistake, keystroke by keystroke: select the word, type over it
      const n0 = Number(await page.evaluate(() => document.body.dataset.checked));
      await page.locator(".cm-line span", { hasText: /^capacity$/ }).first().dblclick();
      await page.keyboard.type("capcity", { delay: 30 });
      eq(await editorText(), text, "the text after typing the mistake");
      await checked(n0);
      await page.waitForSelector(".cm-lintRange-error", { timeout: 30000 });
      const expected = (() => {
        writeFileSync(path.join(tmp, "err.moe"), text);
        const r = mplcStatus(["check", "err.moe", "--format", "json"]);
        eq(r.code, 1, "mplc check exit status");
        return JSON.parse(r.out);
      })();
      eq(expected.map((d) => d.code), ["MPL102"], "mplc check codes");
      const squiggled = await page.$$eval(".cm-lintRange-error", (l) => l.map((e) => e.textContent));
      eq(squiggled, ["capcity"], "the squiggled text");
      const items = await page.$$eval(".problem", (l) => l.map((e) => ({ code: e.dataset.code,
        message: e.querySelector(".message").textContent, where: e.querySelector(".where").textContent,
        fixes: [...e.querySelectorAll(".fix")].map((b) => b.textContent) })));
      eq(items, expected.map((d) => ({ code: d.code, message: d.message, where: `${d.span.line}:${d.span.column}`,
        fixes: d.fixes.map((f) => f.title) })), "the Problems list");
      await page.hover(".cm-lintRange-error");
      await page.waitForSelector(".cm-tooltip-lint", { timeout: 10000 });
      const tip = await page.textContent(".cm-tooltip-lint");
      ok(tip.includes(`${expected[0].code} ${expected[0].message}`), `lint tooltip: ${tip}`);
      ok(tip.includes(expected[0].fixes[0].title), `quick fix in the tooltip: ${tip}`);
      await shot("02-error-squiggle");
      const n = Number(await page.evaluate(() => document.body.dataset.checked));
      await page.click(".cm-tooltip-lint .cm-diagnosticAction");
      eq(await editorText(), text.replace("capcity", "capacity"), "text after the quick fix");
      await checked(n);
      await page.waitForFunction(() => document.querySelectorAll(".cm-lintRange-error").length === 0, null, { timeout: 10000 });
      eq(await page.$$eval(".problem", (l) => l.length), 0, "problems after the fix");
    });

    await check("hover shows the schema's doc", async () => {
      const doc = pyEval('schema.PARAMS["cache.eviction"].doc');
      const span = page.locator(".cm-line span", { hasText: /^eviction$/ }).first();
      await page.mouse.move(0, 0);
      await span.hover();
      await page.waitForSelector(".hover-doc", { timeout: 15000 });
      const hov = await page.textContent(".hover-doc");
      ok(hov.includes("cache.eviction"), `hover header: ${hov.slice(0, 200)}`);
      ok(hov.replace(/\s+/g, " ").includes(doc.replace(/\s+/g, " ").replace(/`/g, "")), `hover doc: ${hov.slice(0, 400)}`);
      ok(hov.includes("Effective value in p"), "effective value");
      await shot("03-hover");
      await page.mouse.move(0, 0);
    });

    await check("Format gives mplc fmt's text; syntax errors are refused", async () => {
      await pasteText(MESSY);
      await page.click("#format");
      await page.waitForFunction(() => document.getElementById("format-status").textContent !== "", null, { timeout: 15000 });
      eq(await editorText(), mplc(["fmt", "-"], MESSY), "formatted text");
      await shot("04-format");
      await pasteText("policy broken { cache { capacity = = 8 } }\n");
      await page.click("#format");
      await page.waitForFunction(() => document.getElementById("format-status").dataset.kind === "error", null, { timeout: 15000 });
      const note = await page.textContent("#format-status");
      ok(note.includes("syntax errors") && note.includes("line 1"), `refusal: ${note}`);
      eq(await editorText(), "policy broken { cache { capacity = = 8 } }\n", "a refused format changes nothing");
    });

    let expectedReplay;
    await check("Replay on a synthetic trace equals mplc replay --json", async () => {
      await pasteText(REPLAY_POLICY);
      await page.selectOption("#preset", TRACE.preset);
      await page.fill("#steps", TRACE.steps);
      await page.fill("#seed", TRACE.seed);
      await page.selectOption("#hardware", TRACE.hardware);
      ok(await replayOnce(), `replay error: ${await page.textContent("#replay-status")}`);
      writeFileSync(path.join(tmp, "trial.moe"), REPLAY_POLICY);
      mplc(["trace", "synth", "--preset", TRACE.preset, "--steps", TRACE.steps, "--seed", TRACE.seed, "-o", "t.mpltrace"]);
      expectedReplay = mplcJson(["replay", "trial.moe", "--trace", "t.mpltrace", "--hardware", TRACE.hardware, "--json", "--no-progress"]);
      const raw = async (id) => Number(await page.getAttribute(`#${id}`, "data-raw"));
      const e = expectedReplay;
      eq(await raw("r-hit-rate"), e.stats.hit_rate, "hit rate");
      eq(await raw("r-belady"), e.belady.hit_rate, "Belady's hit rate");
      eq(await raw("r-gap"), e.gap, "gap");
      eq(await raw("r-tokens"), e.sim.tokens_per_s, "simulated tokens/s");
      eq(await raw("r-step"), e.sim.time_per_step_ms, "time per step");
      eq(await raw("r-accesses"), e.stats.accesses, "accesses");
      eq(await raw("r-loads"), e.stats.loads, "loads");
      eq(await raw("r-evictions"), e.stats.evictions, "evictions");
      eq(await page.textContent("#r-hit-rate"), `${(100 * e.stats.hit_rate).toFixed(2)} %`, "hit rate as shown");
      eq(await page.textContent("#r-tokens"), `${e.sim.tokens_per_s.toFixed(2)} tok/s`, "tokens/s as shown");
      // the plot: each point equals mplc sweep at the same capacities
      const pts = await page.evaluate(() => window.playground.sweep.points);
      const dots = await page.$$eval("#plot circle.policy", (l) => l.map((c) => [Number(c.dataset.capacity), Number(c.dataset.value)]));
      const bdots = await page.$$eval("#plot circle.belady", (l) => l.map((c) => [Number(c.dataset.capacity), Number(c.dataset.value)]));
      ok(pts.length >= 4, `sweep points: ${pts.length}`);
      const sw = mplcJson(["sweep", "trial.moe", "--trace", "t.mpltrace", "--hardware", TRACE.hardware,
        "--capacity", pts.map((p) => p.capacity).join(","), "--json"]);
      const swPoints = sw.points ?? sw;
      eq(dots, swPoints.map((p) => [p.capacity, p.hit_rate]), "the plot's policy points (mplc sweep)");
      eq(bdots, swPoints.map((p) => [p.capacity, p.belady]), "the plot's Belady points (mplc sweep)");
      await shot("05-replay");
    });

    await check("a failed replay clears the earlier results", async () => {
      ok(await page.isVisible("#results"), "the results of the replay before");
      ok((await page.$$eval("#plot circle", (l) => l.length)) > 0, "the plot of the replay before");
      const broken = "policy broken { cache { capacity = = 8 } }\n";
      await pasteText(broken);
      try {
        ok(!(await replayOnce()), "a policy with a syntax error replayed");
        eq(await page.getAttribute("#replay-status", "data-kind"), "error", "the status's kind");
        ok((await page.textContent("#replay-status")).length > 0, "the status says why");
        eq(await page.isHidden("#results"), true, "the results are hidden");
        eq(await page.$$eval(RESULT_CELLS.map((id) => `#${id}`).join(", "), (l) => l.map((e) => e.textContent + e.dataset.raw)),
          RESULT_CELLS.map(() => ""), "the result cells are empty");
        eq(await page.$$eval("#plot *", (l) => l.length), 0, "the plot is empty");
        eq(await page.evaluate(() => [window.playground.report, window.playground.sweep]), [null, null], "the report and sweep kept");
        await shot("05b-failed-replay");
      } finally {
        await pasteText(REPLAY_POLICY);     // the policy the checks below replay
      }
    });

    await check("a dropped .mpltrace and .jsonl replay as mplc replays those files", async () => {
      mplc(["trace", "convert", "t.mpltrace", "t.jsonl"]);
      for (const file of ["t.mpltrace", "t.jsonl"]) {
        await page.setInputFiles("#trace-file", path.join(tmp, file));
        await page.waitForFunction(() => document.getElementById("replay-status").textContent === "trace loaded", null, { timeout: 60000 });
        ok(await replayOnce(), `${file}: replay error: ${await page.textContent("#replay-status")}`);
        const e = mplcJson(["replay", "trial.moe", "--trace", file, "--hardware", TRACE.hardware, "--json", "--no-progress"]);
        eq(Number(await page.getAttribute("#r-hit-rate", "data-raw")), e.stats.hit_rate, `${file}: hit rate`);
        eq(Number(await page.getAttribute("#r-belady", "data-raw")), e.belady.hit_rate, `${file}: Belady`);
        eq(Number(await page.getAttribute("#r-tokens", "data-raw")), e.sim.tokens_per_s, `${file}: tokens/s`);
        ok((await page.textContent("#r-summary")).includes(file), "the summary names the file");
      }
      await shot("06-dropped-trace");
      writeFileSync(path.join(tmp, "bad.jsonl"), "not a trace\n");
      await page.setInputFiles("#trace-file", path.join(tmp, "bad.jsonl"));
      await page.waitForFunction(() => document.getElementById("replay-status").dataset.kind === "error", null, { timeout: 30000 });
      ok((await page.textContent("#replay-status")).includes("bad.jsonl"), "a bad file is refused, named");
      await page.check('input[name="trace-source"][value="synth"]');
    });

    await check("a share link reopens the same policy and trace settings", async () => {
      await page.click("#share");
      await page.waitForFunction(() => !document.getElementById("share-url").hidden, null, { timeout: 10000 });
      const url = await page.inputValue("#share-url");
      ok(url.startsWith(base) && url.includes("#v=1&"), `share link: ${url}`);
      const other = await context.newPage();
      other.on("pageerror", (e) => pageErrors.push(String(e)));
      await other.goto(url);
      await other.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 180000 });
      eq(await other.evaluate(() => window.playground.view.state.doc.toString()), REPLAY_POLICY, "shared policy");
      for (const k of ["preset", "steps", "seed", "hardware"]) {
        eq(await other.inputValue(`#${k}`), TRACE[k], `shared ${k}`);
      }
      await other.screenshot({ path: path.join(SHOTS, "07-shared-link.png"), fullPage: true });
      // the same link, cut short as a copy can cut it: the page says so, and keeps saying so
      // once it is ready (the status line moves on), with the default policy in the editor
      const cut = url.slice(0, url.length - 12);
      await other.goto("about:blank");
      await other.goto(cut);
      await other.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 180000 });
      ok(await other.isVisible("#notice"), "no notice for a damaged link");
      const notice = await other.textContent("#notice-text");
      ok(notice.includes("This share link could not be read") && notice.includes("damaged") && notice.includes("default policy"),
        `the notice: ${notice}`);
      ok((await other.textContent("#status")).includes("pure runtime"), "the status line once ready");
      eq(await other.evaluate(() => window.playground.view.state.doc.toString()), defaultPolicy, "the editor's policy");
      await other.screenshot({ path: path.join(SHOTS, "07b-damaged-link.png"), fullPage: true });
      await other.click("#notice-close");
      eq(await other.isHidden("#notice"), true, "the notice after dismissing it");
      await other.close();
    });

    await check("at 420 and 768 px wide nothing scrolls sideways", async () => {
      ok(await page.isVisible("#results"), "the results are on screen (the widest content)");
      try {
        for (const width of [420, 768]) {
          await page.setViewportSize({ width, height: 900 });
          await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
          const m = await page.evaluate(() => {
            const d = document.documentElement;
            const wide = [...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > d.clientWidth + 0.5)
              .map((e) => `${e.tagName.toLowerCase()}#${e.id}.${e.className}`).slice(0, 5);
            return { scroll: d.scrollWidth, client: d.clientWidth, editor: document.querySelector(".cm-editor").getBoundingClientRect().width, wide };
          });
          ok(m.scroll <= m.client, `${width} px: the page is ${m.scroll} px wide in a ${m.client} px window; past its edge: ${m.wide.join(", ")}`);
          ok(m.editor >= width - 40, `${width} px: the editor is ${m.editor} px wide`);
          await shot(`08-width-${width}`);
        }
      } finally {
        await page.setViewportSize({ width: 1400, height: 1000 });
      }
    });

    await check("no page errors and no request outside the page", async () => {
      eq(pageErrors, [], "page errors");
      eq(outside, [], "requests outside 127.0.0.1");
    });
  } finally {
    await browser.close();
    server.close();
    rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`\nscreenshots: ${path.relative(process.cwd(), SHOTS)}`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
