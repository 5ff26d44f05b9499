// Drives code-server in headless Chromium (puppeteer-core) and checks what a user sees:
// diagnostics with their codes in the Problems panel, completion of parameter names, hover
// docs, Format Document, the bundled server on a fresh install (Python from User settings in
// this remote window), semantic colours equal to the grammar's (pixels, four themes), inlay
// hints of one-line blocks, a refused Format Document's message, the server choice command,
// the notifications when no Python fits, the README's screenshot on the extension's page,
// Format Document while the server restarts. Started by run.sh, which passes the URL and the expected values
// (computed from the repository: the checker's codes, the schema's names and docs, the
// formatter's output).
import { createRequire } from "node:module";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";

const { values: args } = parseArgs({
  options: {
    url: { type: "string" }, chromium: { type: "string" }, workspace: { type: "string" },
    expected: { type: "string" }, shots: { type: "string" }, deps: { type: "string" },
    logs: { type: "string" }, settings: { type: "string" },
  },
});
const expected = JSON.parse(readFileSync(args.expected, "utf8"));
mkdirSync(args.shots, { recursive: true });
const require = createRequire(join(args.deps, "noop.js"));
const puppeteer = (await import(pathToFileURL(require.resolve("puppeteer-core")).href)).default;

const TIMEOUT = 60_000;
const results = [];
let page;

function log(msg) {
  console.log(`[e2e] ${msg}`);
}

async function shot(name) {
  const file = join(args.shots, `${name}.png`);
  await page.screenshot({ path: file });
  log(`screenshot ${file}`);
}

async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    results.push([name, true]);
    log(`PASS ${name} (${Date.now() - t0} ms)`);
  } catch (err) {
    results.push([name, false]);
    log(`FAIL ${name}: ${err && err.stack ? err.stack : err}`);
    await shot(`fail-${name.replace(/\W+/g, "-")}`).catch(() => {});
  }
}

/** Wait until fn() (run in the page) returns a truthy value; returns it. */
async function until(fn, arg, what, timeout = TIMEOUT) {
  try {
    const handle = await page.waitForFunction(fn, { timeout, polling: 250 }, arg);
    return await handle.jsonValue();
  } catch (err) {
    throw new Error(`timed out waiting for ${what}: ${err.message}`);
  }
}

/** The extension's log (the MoE-PolicyLang output channel), as written so far. */
function extensionLog() {
  const found = readdirSync(args.logs, { recursive: true }).filter((f) => String(f).endsWith("MoE-PolicyLang.log"));
  return found.map((f) => readFileSync(join(args.logs, String(f)), "utf8")).join("\n");
}

async function untilLog(re, what, timeout = 30_000) {
  const t0 = Date.now();
  while (Date.now() - t0 < timeout) {
    const logText = extensionLog();
    if (typeof re === "string" ? logText.includes(re) : re.test(logText)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what} in the extension log`);
}

const text = (sel) => page.$eval(sel, (el) => el.innerText).catch(() => "");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Change the workspace settings (.vscode/settings.json, which the workbench watches) the way
 *  a user editing the file does. */
function setWorkspaceSettings(values) {
  const dir = join(args.workspace, ".vscode");
  const file = join(dir, "settings.json");
  mkdirSync(dir, { recursive: true });
  let cur = {};
  try { cur = JSON.parse(readFileSync(file, "utf8")); } catch { cur = {}; }
  for (const [k, v] of Object.entries(values)) {
    if (v === undefined) delete cur[k]; else cur[k] = v;
  }
  writeFileSync(file, JSON.stringify(cur, null, 2));
}

/** The rendered span of the text at (line, column) (1-based) of the active editor: its
 *  computed colour and the screen rectangle of exactly those characters. */
function tokenAt(line, col, len) {
  return page.evaluate((line, col, len) => {
    // the view-line at the top of the line number `line` (the editor may be scrolled)
    const num = [...document.querySelectorAll(".editor-instance .margin-view-overlays .line-numbers")]
      .find((n) => n.textContent.trim() === String(line));
    if (!num) return null;
    const y = num.getBoundingClientRect().top;
    const el = [...document.querySelectorAll(".editor-instance .view-lines .view-line")]
      .find((l) => Math.abs(l.getBoundingClientRect().top - y) < 2);
    if (!el) return null;
    let pos = 0;
    for (const sp of el.querySelectorAll(":scope > span > span")) {
      const t = sp.textContent;
      if (col - 1 < pos + t.length) {
        const node = sp.firstChild;
        const r = document.createRange();
        r.setStart(node, col - 1 - pos);
        r.setEnd(node, Math.min(t.length, col - 1 - pos + len));
        const b = r.getBoundingClientRect();
        const rgb = getComputedStyle(sp).color.match(/\d+/g).slice(0, 3).map(Number);
        return { text: r.toString(), color: "#" + rgb.map((x) => x.toString(16).padStart(2, "0")).join(""),
                 rect: { x: b.x, y: b.y, width: b.width, height: b.height } };
      }
      pos += t.length;
    }
    return null;
  }, line, col, len);
}

/** The text on screen of line `n` (1-based, hints included) once it shows a `defaults:` hint. */
function lineWithHint(n, what) {
  return until((i) => {
    const lines = [...document.querySelectorAll(".editor-instance .view-lines .view-line")]
      .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top));
    const t = lines[i] ? lines[i].innerText.replace(/\u00a0/g, " ") : "";
    return t.includes("defaults:") ? t : "";
  }, n - 1, what);
}

/** Pixels of a token: a PNG of its rectangle, and the colour its glyphs are drawn in (the most
 *  frequent colour after the background's, read back from the PNG in the page). */
async function tokenPixels(tok) {
  // a token always has ink: a blank picture was taken before the editor painted; take another
  for (let attempt = 0; ; attempt++) {
    const got = await tokenPixelsOnce(tok);
    if (got.ink !== null || attempt === 10) return got;
    await sleep(200);
  }
}

async function tokenPixelsOnce(tok) {
  const { x, y, width, height } = tok.rect;
  const png = Buffer.from(await page.screenshot({
    clip: { x: Math.floor(x), y: Math.floor(y), width: Math.ceil(width), height: Math.ceil(height) },
    captureBeyondViewport: false,
  }));
  const ink = await page.evaluate(async (b64) => {
    const img = new Image();
    img.src = `data:image/png;base64,${b64}`;
    await img.decode();
    const c = document.createElement("canvas");
    c.width = img.width;
    c.height = img.height;
    const g = c.getContext("2d");
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data;
    const count = new Map();
    for (let i = 0; i < d.length; i += 4) {
      const k = "#" + [d[i], d[i + 1], d[i + 2]].map((v) => v.toString(16).padStart(2, "0")).join("");
      count.set(k, (count.get(k) || 0) + 1);
    }
    const ranked = [...count.entries()].sort((a, b) => b[1] - a[1]);
    return ranked.length > 1 ? ranked[1][0] : null;
  }, png.toString("base64"));
  return { png, ink };
}

/** Wait for a toast whose text includes `needle`; its text. */
function toast(needle, what) {
  return until((n) => {
    const t = [...document.querySelectorAll(".notifications-toasts .notification-toast")]
      .find((e) => e.innerText.includes(n));
    return t ? t.innerText : "";
  }, needle, what);
}

/** Click the button `label` on the toast that includes `needle`. */
function clickToastButton(needle, label) {
  return page.evaluate((n, l) => {
    const t = [...document.querySelectorAll(".notifications-toasts .notification-toast")]
      .find((e) => e.innerText.includes(n));
    const b = t && [...t.querySelectorAll("a.monaco-button, .monaco-button")].find((x) => x.innerText.trim() === l);
    if (b) b.click();
    return Boolean(b);
  }, needle, label);
}

/** Pick the quick-pick row whose first line starts with `label`. */
async function pickRow(label) {
  const row = await page.waitForFunction((l) => [...document.querySelectorAll(".quick-input-widget .monaco-list-row")]
    .find((r) => r.innerText.split("\n")[0].trim().startsWith(l)), { timeout: 15_000, polling: 250 }, label)
    .catch(() => null);
  if (row === null) throw new Error(`no '${label}' in the quick pick`);
  await row.asElement().click();
}

/** Run a command from the command palette: the row whose title is `title` (or starts with it). */
async function command(title) {
  await page.keyboard.press("Escape");
  await page.keyboard.press("F1");
  await page.waitForSelector(".quick-input-widget:not([style*='display: none']) input", { visible: true });
  await page.keyboard.type(title, { delay: 5 });
  let row;
  try {
    row = await page.waitForFunction((t) => {
      const rows = [...document.querySelectorAll(".quick-input-widget .monaco-list-row")];
      const lines = (r) => r.innerText.split("\n").map((x) => x.trim().toLowerCase());
      return rows.find((r) => lines(r).includes(t.toLowerCase()))
        ?? rows.find((r) => lines(r).some((x) => x.startsWith(t.toLowerCase())));
    }, { timeout: 15_000, polling: 250 }, title);
  } catch {
    throw new Error(`command '${title}' not found in the palette`);
  }
  await row.asElement().click();
}

/** Quick Open: open a workspace file by name, or go to `:line:column`. */
async function quickOpen(query) {
  await page.keyboard.press("Escape");
  await page.keyboard.press("F1");
  await page.waitForSelector(".quick-input-widget input", { visible: true });
  await page.keyboard.press("Backspace"); // drop the ">" of the command mode
  await page.keyboard.type(query, { delay: 5 });
  if (!query.startsWith(":")) {
    await until((q) => [...document.querySelectorAll(".quick-input-widget .monaco-list-row")]
      .some((r) => r.innerText.includes(q)), query, `'${query}' in quick open`, 20_000);
  }
  await page.keyboard.press("Enter");
}

async function openFile(name) {
  await page.keyboard.press("Escape");
  // click it in the Explorer (the workspace is flat)
  const row = await page.waitForFunction((n) => [...document.querySelectorAll(".explorer-folders-view .monaco-list-row")]
    .find((r) => r.innerText.split("\n")[0].trim() === n), { timeout: 20_000, polling: 250 }, name)
    .catch(() => null);
  if (row === null) {
    await quickOpen(name);
  } else {
    await row.asElement().click();
  }
  await until((n) => {
    const tab = document.querySelector(".tabs-container .tab.active");
    return tab && tab.textContent.replace(/\s+/g, "").includes(n) && document.querySelector(".editor-instance .view-lines");
  }, name, `editor of ${name}`);
  await page.click(".editor-instance .view-lines");
}

async function gotoPosition(line, column) {
  await quickOpen(`:${line}:${column}`);
  await new Promise((r) => setTimeout(r, 300));
}

/** The visible lines of the active editor, in order, as plain text. */
function editorText() {
  return page.$$eval(".editor-instance .view-lines .view-line", (lines) =>
    lines.map((l) => [parseFloat(l.style.top) || 0, l.innerText.replace(/\u00a0/g, " ")])
      .sort((a, b) => a[0] - b[0]).map((x) => x[1]).join("\n"));
}

const browser = await puppeteer.launch({
  executablePath: args.chromium,
  headless: true,
  userDataDir: join(args.shots, "..", "run", "chromium-profile"),
  defaultViewport: { width: 1400, height: 860 },
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
  ],
});
let exitCode = 1;
try {
  page = await browser.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on("pageerror", (e) => log(`page error: ${e.message}`));
  log(`opening ${args.url}`);
  await page.goto(args.url, { waitUntil: "domcontentloaded" });
  await page.waitForSelector(".monaco-workbench", { timeout: 120_000 });
  await until(() => document.querySelector(".explorer-folders-view .monaco-list-row"), null,
    "the explorer to list the workspace", 120_000);

  await check("diagnostics with codes in the Problems panel", async () => {
    await openFile("errors.moe");
    await command("View: Focus Problems");
    await page.waitForSelector(".markers-panel", { visible: true });
    const want = expected.codes;
    if (want.length === 0) throw new Error("errors.moe has no diagnostics: the fixture is wrong");
    await until((codes) => {
      const panel = document.querySelector(".markers-panel");
      return panel && codes.every((c) => panel.innerText.includes(c));
    }, want, `codes ${want.join(", ")} in the Problems panel`, 90_000);
    const panel = await text(".markers-panel");
    log(`Problems panel:\n${panel}`);
    if (!/capcity/.test(panel)) throw new Error("the unknown-parameter message is missing");
    await shot("problems");
  });

  await check("the extension's page shows the README's screenshot", async () => {
    // the package links each README image by its https: URL in the repository (the page keeps
    // no other kind of image source); this machine has no network, so the test answers that
    // URL with the repository's file, as the repository's host would
    const images = new Map(expected.readmeImages.map(([, url, file]) => [url, readFileSync(file)]));
    if (images.size === 0) throw new Error("the packaged README has no image");
    const asked = [];
    const answer = (req) => {
      const body = images.get(req.url());
      if (body !== undefined) {
        asked.push(req.url());
        void req.respond({ status: 200, contentType: "image/png", body });
      } else {
        void req.continue();
      }
    };
    await page.setRequestInterception(true);
    page.on("request", answer);
    try {
      await command("Extensions: Show Installed Extensions");
      const row = await page.waitForFunction(() => [...document.querySelectorAll(".extensions-viewlet .monaco-list-row")]
        .find((r) => r.innerText.includes("MoE-PolicyLang")), { timeout: 30_000, polling: 250 });
      await row.asElement().click();
      const [alt, url, file] = expected.readmeImages[0];
      // the README is a webview (frames in frames): the image, once it has loaded or failed
      let img = null;
      const t0 = Date.now();
      while (img === null && Date.now() - t0 < TIMEOUT) {
        for (const f of page.frames()) {
          img = await f.evaluate((a) => {
            const el = [...document.images].find((i) => i.alt === a);
            return el && el.complete ? { src: el.getAttribute("src"), width: el.naturalWidth } : null;
          }, alt).catch(() => null);
          if (img !== null) break;
        }
        if (img === null) await sleep(250);
      }
      log(`README image: ${JSON.stringify(img)}, requested: ${JSON.stringify(asked)}`);
      if (img === null) throw new Error(`no image '${alt}' on the extension's page`);
      if (img.src !== url) throw new Error(`the image's source is ${img.src}, not ${url} (the page drops relative and data: sources)`);
      const width = readFileSync(file).readUInt32BE(16);   // the PNG's IHDR width
      if (img.width !== width) throw new Error(`the image shows ${img.width} px wide, not ${width} (it did not load)`);
      await shot("extension-page");
    } finally {
      page.off("request", answer);
      await page.setRequestInterception(false);
      await command("View: Close All Editors");
      await command("View: Show Explorer");    // the checks below open files from the Explorer
    }
  });

  await check("hover shows the parameter's docs", async () => {
    await openFile("errors.moe");
    // line 7: "        eviction = lfru": the cursor on the parameter name
    await gotoPosition(7, 11);
    await command("Show or Focus Hover");
    const words = expected.hoverDoc.replace(/`/g, "").split(/\s+/).slice(0, 4).join(" ");
    const got = await until((w) => {
      const h = [...document.querySelectorAll(".monaco-hover")].find((e) => e.offsetParent !== null
        && e.innerText.includes(w));
      return h ? h.innerText : "";
    }, words, `a hover containing '${words}'`);
    log(`hover:\n${got}`);
    if (!got.includes(expected.hoverParam)) throw new Error(`hover does not name '${expected.hoverParam}'`);
    await shot("hover");
    await shot("readme");
    await page.keyboard.press("Escape");
  });

  await check("completion offers parameter names", async () => {
    await openFile("completion.moe");
    await gotoPosition(4, 9); // the empty line inside `cache { ... }`
    await page.keyboard.down("Control");
    await page.keyboard.press("Space");
    await page.keyboard.up("Control");
    const shown = await until((names) => {
      const rows = [...document.querySelectorAll(".suggest-widget .monaco-list-row")];
      const labels = rows.map((r) => (r.getAttribute("aria-label") || r.innerText).split(/[\s,]/)[0]);
      const hits = names.filter((n) => labels.includes(n));
      return hits.length >= 3 ? labels : null;
    }, expected.cacheParams, "a completion list with cache parameter names");
    log(`completion items: ${shown.join(", ")}`);
    // the file-level snippets are offered at the top of a file only (the extension ships none)
    const fileLevel = shown.filter((l) => ["policy", "import", "extends", "version"].includes(l));
    if (fileLevel.length > 0) throw new Error(`file-level items inside cache { }: ${fileLevel.join(", ")}`);
    await shot("completion");
    await page.keyboard.type("evic");
    const evic = await page.waitForFunction(() => [...document.querySelectorAll(".suggest-widget .monaco-list-row")]
      .find((r) => (r.getAttribute("aria-label") || r.innerText).startsWith("eviction")),
    { timeout: 15_000, polling: 250 }).catch(() => null);
    if (evic === null) throw new Error("no 'eviction' after typing 'evic'");
    await evic.asElement().click();
    const after = await editorText();
    if (!/^\s*eviction\b/m.test(after)) throw new Error(`accepting the item did not insert it:\n${after}`);
    await command("File: Revert File");
  });

  await check("Format Document gives the formatter's output", async () => {
    await openFile("unformatted.moe");
    await command("Format Document");
    // inlay hints share the lines that open blocks: compare the other lines on screen, then
    // the saved file exactly
    const want = expected.formatted.split("\n").filter((l) => l.trim() !== "" && !l.includes("{"));
    await until((w) => {
      const lines = [...document.querySelectorAll(".editor-instance .view-lines .view-line")]
        .map((l) => l.innerText.replace(/\u00a0/g, " ").replace(/\s+$/, ""));
      return w.every((x) => lines.includes(x.replace(/\s+$/, "")));
    }, want, "the formatted lines in the editor");
    await command("File: Save");
    let onDisk = "";
    for (let i = 0; i < 60 && onDisk !== expected.formatted; i++) {
      await new Promise((r) => setTimeout(r, 250));
      onDisk = readFileSync(join(args.workspace, "unformatted.moe"), "utf8");
    }
    if (onDisk !== expected.formatted) {
      throw new Error(`saved file differs from mpl.fmt.format_text:\n${onDisk}`);
    }
    await shot("formatted");
  });

  await check("the policy snippet is offered once, at the top, and expands to a policy the server accepts", async () => {
    // the extension ships no snippets: the server's completion offers the file-level ones
    // where they can be typed (and nothing offers them inside a block)
    await openFile("snippet.moe");
    await gotoPosition(2, 1);
    await page.keyboard.type("polic");
    await page.keyboard.down("Control");
    await page.keyboard.press("Space");
    await page.keyboard.up("Control");
    const rows = await page.waitForFunction(() => {
      const r = [...document.querySelectorAll(".suggest-widget .monaco-list-row")]
        .filter((x) => x.querySelector(".codicon-symbol-snippet") && /^policy\b/.test(x.innerText.trim()));
      return r.length > 0 ? r.length : null;
    }, { timeout: TIMEOUT, polling: 250 }).then((h) => h.jsonValue()).catch(() => 0);
    if (rows !== 1) throw new Error(`expected one 'policy' snippet in the completion list, found ${rows}`);
    const row = await page.evaluateHandle(() => [...document.querySelectorAll(".suggest-widget .monaco-list-row")]
      .find((x) => x.querySelector(".codicon-symbol-snippet") && /^policy\b/.test(x.innerText.trim())));
    await row.asElement().click();
    // accept every placeholder's default / first choice
    for (let i = 0; i < 6; i++) {
      await page.keyboard.press("Escape");
    }
    const body = await editorText();
    log(`expanded:\n${body}`);
    if (!/^policy name \{/m.test(body) || !/^\s+capacity = \d+/m.test(body)) {
      throw new Error("the snippet did not expand to a policy with a capacity");
    }
    await command("File: Save");
    await command("View: Focus Problems");
    // the server has checked the new text: no problem is listed for snippet.moe
    await new Promise((r) => setTimeout(r, 3000));
    const panel = await text(".markers-panel");
    if (panel.includes("snippet.moe")) throw new Error(`problems in the expanded snippet:\n${panel}`);
    await shot("snippet");
  });

  await check("Restart server command restarts the server", async () => {
    const before = extensionLog().split("language server running").length;
    await command("MoE-PolicyLang: Restart server");
    await untilLog(/\(re\)starting the language server: restart command[\s\S]*language server running/,
      "a restart by the command");
    const after = extensionLog().split("language server running").length;
    if (after !== before + 1) throw new Error(`expected one more start, log has ${after - 1}`);
    // the restarted server publishes the diagnostics again
    await openFile("errors.moe");
    await command("View: Focus Problems");
    await until((codes) => {
      const panel = document.querySelector(".markers-panel");
      return panel && codes.every((c) => panel.innerText.includes(c));
    }, expected.codes, "the codes after the restart", 60_000);
  });

  await check("Go to Definition on a standard-library policy opens it read-only; its rename is refused", async () => {
    await openFile("stdlib_ref.moe");
    await gotoPosition(3, 23); // in `extends lru_basic`
    await page.keyboard.press("F12");
    await until(() => {
      const tab = document.querySelector(".tabs-container .tab.active");
      return tab && tab.textContent.includes("lru_basic.moe") && document.querySelector(".editor-instance .view-lines");
    }, null, "the standard library's lru_basic.moe in an editor");
    const tab = await page.$eval(".tabs-container .tab.active", (t) => `${t.getAttribute("title") ?? ""} | ${t.getAttribute("aria-label") ?? ""}`);
    log(`definition tab: ${tab}`);
    await sleep(500);
    const before = await editorText();
    if (!before.includes("policy lru_basic")) throw new Error(`not the standard library's policy:\n${before}`);
    await page.click(".editor-instance .view-lines");
    await page.keyboard.type("zz");
    await sleep(500);
    const after = await editorText();
    if (after !== before) throw new Error("the standard-library view took the typed keys (it is not read-only)");
    await shot("stdlib-read-only");
    await command("View: Close Editor");
    await openFile("stdlib_ref.moe");
    await gotoPosition(3, 23);
    const before2 = await editorText();
    await page.keyboard.press("F2");
    // the rename box opens once the server's prepareRename answered; type only when it has focus
    await until(() => Boolean(document.activeElement?.closest(".rename-box")), null, "the rename box, focused", 20_000);
    await page.keyboard.down("Control");
    await page.keyboard.press("KeyA");
    await page.keyboard.up("Control");
    await page.keyboard.type("renamed");
    await page.keyboard.press("Enter");
    const msg = await until(() => {
      const el = [...document.querySelectorAll(".monaco-editor-overlaymessage, .notifications-toasts .notification-toast")]
        .find((e) => e.innerText.includes("cannot be renamed"));
      return el ? el.innerText : "";
    }, null, "the refused rename's message", 20_000);
    if ((await editorText()) !== before2) throw new Error("the refused rename changed the text");
    log(`rename refused: ${msg}`);
    await page.keyboard.press("Escape");
    await untilLog("mpl-lsp: request refused: policy 'lru_basic' is defined in the standard library",
      "one line for the refused rename");
  });

  await check("fresh install: a Python without the server runs the bundled one, said once", async () => {
    // run.sh points mpl.server.pythonPath (User settings, in this remote window) at a bare venv
    const logText = extensionLog();
    if (!/starting the language server: \S+ \(Python [\d.]+, from the mpl\.server\.pythonPath setting.*\), bundled server/.test(logText)) {
      throw new Error(`the server did not start from the User setting with the bundled server:\n${logText.slice(-3000)}`);
    }
    const told = logText.split("the Python environment has no MoE-PolicyLang language server").length - 1;
    if (told !== 1) throw new Error(`the fallback is explained ${told} times, not once`);
  });

  await check("semantic tokens keep the grammar's colours (pixels, four default themes)", async () => {
    await openFile("colors.moe");
    const toks = expected.colorTokens;
    try {
      for (const [theme, want] of Object.entries(expected.themeColors)) {
        const slug = theme.replace(/\W+/g, "-").toLowerCase();
        // 1. TextMate only (as before the server's tokens arrive)
        // nothing but the tokens may differ between the two pictures: no hints, no line highlight,
        // a cursor that does not blink, far from the tokens
        setWorkspaceSettings({ "workbench.colorTheme": theme, "editor.semanticHighlighting.enabled": false,
                               "editor.inlayHints.enabled": "off", "editor.renderLineHighlight": "none",
                               "editor.cursorBlinking": "solid", "editor.occurrencesHighlight": "off",
                               "editor.stickyScroll.enabled": false });
        await gotoPosition(1, 1);
        await gotoPosition(2, 23);
        const t0 = Date.now();
        let before = [];
        for (;;) {
          before = [];
          for (const [line, col, word] of toks) before.push(await tokenAt(line, col, word.length));
          if (before.every((b, i) => b && b.color === want[i].toLowerCase())) break;
          if (Date.now() - t0 > 30_000) {
            throw new Error(`${theme}: grammar colours ${JSON.stringify(before.map((b, i) => [toks[i][2], b && b.color, want[i]]))}`);
          }
          await sleep(250);
        }
        await page.mouse.move(5, 600);   // no tooltip over the editor
        await sleep(1500);               // the layout settles (it may move after a theme change)
        const pixels = [];
        for (let i = 0; i < toks.length; i++) {
          before[i] = await tokenAt(toks[i][0], toks[i][1], toks[i][2].length);
          pixels.push(await tokenPixels(before[i]));
        }
        await shot(`colors-${slug}-grammar`);
        // 2. with the server's semantic tokens: confirmed applied (on a parameter name)
        setWorkspaceSettings({ "editor.semanticHighlighting.enabled": true });
        const t1 = Date.now();
        for (;;) {
          await gotoPosition(5, 11);
          await command("Developer: Inspect Editor Tokens and Scopes");
          const info = await until(() => {
            const w = document.querySelector(".token-inspect-widget");
            return w && w.innerText.includes("textmate scopes") ? w.innerText : "";
          }, null, "the token inspector", 15_000);
          await page.keyboard.press("Escape");
          const sem = /semantic token type\s*(\S+)/.exec(info);
          if (sem) {
            log(`${theme}: the server's token on 'capacity' is '${sem[1]}'`);
            break;
          }
          if (Date.now() - t1 > 30_000) throw new Error(`${theme}: no semantic token on 'capacity':\n${info}`);
          await sleep(500);
        }
        await gotoPosition(1, 1);
        await gotoPosition(2, 23);   // the end of the import line: no token compared there
        await page.mouse.move(5, 600);
        await sleep(1500);     // the go-to-line highlight fades
        const diffs = [];
        for (let i = 0; i < toks.length; i++) {
          const after = await tokenAt(toks[i][0], toks[i][1], toks[i][2].length);
          const now = after ? await tokenPixels(after) : null;
          const same = after && after.color === before[i].color && now.ink !== null && now.ink === pixels[i].ink;
          if (!same) {
            diffs.push(`${toks[i][2]}: CSS ${before[i].color} -> ${after && after.color}, ` +
              `pixels ${pixels[i].ink} -> ${now && now.ink} at ${JSON.stringify(before[i].rect)}`);
            writeFileSync(join(args.shots, `diff-${slug}-${toks[i][2]}-grammar.png`), pixels[i].png);
            if (now) writeFileSync(join(args.shots, `diff-${slug}-${toks[i][2]}-semantic.png`), now.png);
          }
        }
        await shot(`colors-${slug}-semantic`);
        if (diffs.length) throw new Error(`${theme}: colours changed with the server's tokens: ${diffs.join(", ")}`);
        log(`${theme}: ${toks.length} tokens keep their colours and pixels`);
      }
    } finally {
      setWorkspaceSettings({ "workbench.colorTheme": undefined, "editor.inlayHints.enabled": undefined,
                             "editor.semanticHighlighting.enabled": undefined, "editor.renderLineHighlight": undefined,
                             "editor.cursorBlinking": undefined, "editor.occurrencesHighlight": undefined,
                             "editor.stickyScroll.enabled": undefined });
    }
  });

  await check("inlay hints of a one-line block: labelled, after its '}', not cut", async () => {
    await openFile("hints.moe");
    const line = await lineWithHint(5, "the defaults hint on the one-line schedule block");
    log(`line 5: ${line}`);
    if (!/^\s*schedule \{ mode = hybrid \}\s*defaults: /.test(line)) throw new Error(`the hint is not after '}': ${line}`);
    if (line.includes("…")) throw new Error(`the hint is cut: ${line}`);
    const block = await lineWithHint(2, "the defaults hint of the cache block");
    if (!/^\s*cache \{\s*defaults: /.test(block) || block.includes("…")) throw new Error(`cache line: ${block}`);
    await shot("inlay-hints");
  });

  await check("Format Document on a file with syntax errors says why", async () => {
    await openFile("broken.moe");
    await command("Format Document");
    const msg = await toast("was not formatted", "the 'not formatted' notification");
    log(`notification: ${msg.replace(/\s+/g, " ")}`);
    if (!/broken\.moe was not formatted: it has syntax errors \(line 3/.test(msg)) throw new Error(msg);
    await shot("format-refused");
    await command("Notifications: Clear All Notifications");
  });

  await check("Format Document while the server restarts waits for it: formatted, no 'no formatter' dialog", async () => {
    // an interpreter that takes 4 s to start, each time (the probe, then the server): after the
    // settings change below the old server is stopped and the new one is seconds away
    const real = JSON.parse(readFileSync(args.settings, "utf8"))["mpl.server.pythonPath"];
    const slow = join(args.workspace, "..", "slow-python");
    writeFileSync(slow, `#!/bin/sh\nsleep 4\nexec "${real}" "$@"\n`, { mode: 0o755 });
    const mark = "(re)starting the language server: settings changed";
    const restarts = extensionLog().split(mark).length;
    await openFile("restart_format.moe");
    try {
      setWorkspaceSettings({ "mpl.server.pythonPath": slow });
      // the log since this restart began; "import strategy" comes once the old server has
      // stopped, as the new start begins
      const since = () => extensionLog().split(mark).slice(restarts).join(mark);
      for (const t0 = Date.now(); !since().includes("import strategy:"); await sleep(250)) {
        if (Date.now() - t0 > 30_000) throw new Error("timed out waiting for the restart to begin in the extension log");
      }
      if (since().includes("language server running")) throw new Error("the new server was running before Format Document");
      await command("Format Document");
      const dialog = () => page.evaluate(() => [...document.querySelectorAll(".monaco-dialog-box, .notifications-toasts .notification-toast")]
        .map((e) => e.innerText).find((t) => /no formatter/i.test(t)) ?? "");
      const want = expected.formattedRestart.split("\n").filter((l) => l.trim() !== "" && !l.includes("{"));
      const t0 = Date.now();
      for (;;) {
        const shown = await dialog();
        if (shown) throw new Error(`VS Code's dialog: ${shown.replace(/\s+/g, " ")}`);
        const lines = (await editorText()).split("\n").map((l) => l.replace(/\s+$/, ""));
        if (want.every((x) => lines.includes(x.replace(/\s+$/, "")))) break;
        if (Date.now() - t0 > 60_000) throw new Error(`not formatted:\n${lines.join("\n")}`);
        await sleep(250);
      }
      if (!since().includes("language server running")) throw new Error("formatted without the restarted server");
      log(`formatted once the restarted server ran: ${since().split("\n").filter((l) => /starting the language server:|running/.test(l)).join(" | ")}`);
      await command("File: Save");
      let onDisk = "";
      for (let i = 0; i < 60 && onDisk !== expected.formattedRestart; i++) {
        await sleep(250);
        onDisk = readFileSync(join(args.workspace, "restart_format.moe"), "utf8");
      }
      if (onDisk !== expected.formattedRestart) throw new Error(`saved file differs from mpl.fmt.format_text:\n${onDisk}`);
      await shot("format-during-restart");
    } finally {
      await page.keyboard.press("Escape");      // a dialog, had one come
      const running = extensionLog().split("language server running").length;
      setWorkspaceSettings({ "mpl.server.pythonPath": undefined });
      const t1 = Date.now();
      while (extensionLog().split("language server running").length <= running && Date.now() - t1 < 60_000) await sleep(250);
    }
  });

  await check("the server choice stays reachable: command, notification, back to automatic", async () => {
    await openFile("errors.moe");
    await command("MoE-PolicyLang: Choose the language server");
    await pickRow("Server from the Python environment");
    // the bare venv has no server: the start fails, the notification offers the choice again
    const msg = await toast("no suitable Python", "the 'no suitable Python' notification");
    log(`notification: ${msg.replace(/\s+/g, " ")}`);
    if (!msg.includes("Choose server")) throw new Error(`no 'Choose server…' on the notification: ${msg}`);
    await shot("choose-server-failed");
    if (!await clickToastButton("no suitable Python", "Open settings")) throw new Error("no 'Open settings' button");
    await until(() => document.body.innerText.includes("Where the language server's Python code comes from."),
      null, "the Settings editor showing the mpl.server settings");
    // the notification is gone, the command is still there
    const starts = extensionLog().split("language server running").length;
    await command("MoE-PolicyLang: Choose the language server");
    await shot("choose-server");
    await pickRow("Automatic");
    const t0 = Date.now();
    while (extensionLog().split("language server running").length <= starts) {
      if (Date.now() - t0 > 60_000) throw new Error("the server did not start again after choosing Automatic");
      await sleep(250);
    }
    const written = JSON.parse(readFileSync(args.settings, "utf8"))["mpl.server.importStrategy"];
    if (written !== "auto") throw new Error(`User settings have importStrategy ${written}`);
    await command("View: Close All Editors");
  });

  await check("no suitable Python: a settings change restarts, a notification offers Open settings", async () => {
    const bad = join(args.workspace, "no-such-dir", "python3");
    mkdirSync(join(args.workspace, ".vscode"), { recursive: true });
    writeFileSync(join(args.workspace, ".vscode", "settings.json"),
      JSON.stringify({ "mpl.server.pythonPath": bad }, null, 2));
    await untilLog(/\(re\)starting the language server: settings changed/, "a restart on the settings change");
    await untilLog(`tried ${bad} (from the mpl.server.pythonPath setting (Workspace settings)) with the server from the environment: not found`,
      "the failed candidate, with the settings tab it came from");
    const msg = await toast("no suitable Python", "the 'no suitable Python' notification");
    log(`notification: ${msg.replace(/\s+/g, " ")}`);
    if (!msg.includes(bad) || !msg.includes("Workspace settings") || !msg.includes("was not found")) {
      throw new Error("the notification does not name the path, its settings tab and the reason");
    }
    await shot("no-python");
    if (!await clickToastButton("no suitable Python", "Open settings")) throw new Error("no 'Open settings' button on the notification");
    // the Settings editor, searching mpl.server: the import strategy's description is shown
    await until(() => document.body.innerText.includes("Where the language server's Python code comes from."),
      null, "the Settings editor showing the mpl.server settings");
    await shot("settings");
  });

  const failed = results.filter(([, ok]) => !ok).length;
  console.log(`\n${results.length - failed} passed, ${failed} failed`);
  exitCode = failed === 0 ? 0 : 1;
} catch (err) {
  log(`error: ${err && err.stack ? err.stack : err}`);
  await shot("error").catch(() => {});
} finally {
  await browser.close();
}
process.exit(exitCode);
