// The playground page: a CodeMirror editor for .moe policies (the extension's TextMate
// grammar, the checker's diagnostics with their quick fixes, the language server's hover
// text, mplc fmt), and a replay panel (a synthetic or dropped trace, mpl.sim's replay,
// Belady's optimum, simulated tokens/s, hit rate vs capacity). All language knowledge comes
// from Python (worker.js runs mpl in Pyodide); this file only wires the page.
import { closeBrackets, closeBracketsKeymap } from "@codemirror/autocomplete";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { bracketMatching, indentOnInput, indentUnit, syntaxHighlighting } from "@codemirror/language";
import { forceLinting, lintGutter, linter, lintKeymap } from "@codemirror/lint";
import { EditorState } from "@codemirror/state";
import {
  drawSelection, EditorView, highlightActiveLine, highlightActiveLineGutter, hoverTooltip, keymap, lineNumbers,
} from "@codemirror/view";
import { marked } from "marked";

import { renderPlot } from "./plot.js";
import { decodeShare, encodeShare } from "./share.js";
import { scopeHighlighter, textmateLanguage } from "./textmate.js";

const $ = (id) => document.getElementById(id);

// A cache that holds about a third of the default trace's experts (mixtral-8x7b: 32 layers
// x 8), above one step's 64 accesses: what stays is the eviction rule's choice, so changing
// it changes the hit rate (lru 43.5 %, lfu 26.9 %, arc 45.5 %, farthest_layer 52.3 %;
// Belady 73.3 %). A cache that holds every expert would show every rule at the same rate.
const DEFAULT_POLICY = `# Edit this policy and press Replay (Ctrl-Enter) for its hit rate,
# Belady's optimum and simulated tokens/s on the trace at the right.
# 96 slots hold about a third of the default trace's experts, so the
# eviction rule decides what stays: try lfu, arc or farthest_layer.
policy mine {
    cache {
        capacity = 96
        eviction = lru
    }
}
`;

// ------------------------------------------------------------------ the Python worker
const worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
let nextId = 1;
const waiting = new Map();
worker.onmessage = (e) => {
  const { id, result, error } = e.data;
  const w = waiting.get(id);
  waiting.delete(id);
  if (error !== undefined) {
    w.reject(new Error(error));
  } else {
    w.resolve(result);
  }
};
function call(fn, ...args) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    waiting.set(id, { resolve, reject });
    worker.postMessage({ id, fn, args });
  });
}

function setStatus(text, kind = "info") {
  const el = $("status");
  el.textContent = text;
  el.dataset.kind = kind;
}

function escapeHtml(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Markdown of the schema's docs (trusted, but any HTML in it is shown as text). */
function markdown(md) {
  return marked.parse(escapeHtml(md), { gfm: true, breaks: false });
}

// ------------------------------------------------------------------ editor services
const SEVERITY = { error: "error", warning: "warning", hint: "hint", info: "info" };
let lastDiagnostics = [];

function applyEdits(view, edits) {
  view.dispatch({ changes: edits.map((e) => ({ from: e.from, to: e.to, insert: e.insert })) });
}

function renderProblems(view, diags) {
  const list = $("problems");
  list.replaceChildren();
  $("problem-count").textContent = diags.length === 0 ? "no problems" : `${diags.length} problem${diags.length > 1 ? "s" : ""}`;
  for (const d of diags) {
    const li = document.createElement("li");
    li.className = `problem ${d.severity}`;
    li.dataset.code = d.code;
    const code = document.createElement("a");
    code.className = "code";
    code.href = d.url;
    code.target = "_blank";
    code.rel = "noopener";
    code.textContent = d.code;
    const where = document.createElement("button");
    where.className = "where";
    where.textContent = `${d.line}:${d.column}`;
    where.title = "Go to the problem";
    where.onclick = () => {
      view.dispatch({ selection: { anchor: d.from, head: d.to }, scrollIntoView: true });
      view.focus();
    };
    const msg = document.createElement("span");
    msg.className = "message";
    msg.textContent = d.message;
    li.append(code, " ", where, " ", msg);
    for (const f of d.fixes) {
      const b = document.createElement("button");
      b.className = "fix";
      b.textContent = f.title;
      b.onclick = () => applyEdits(view, f.edits);
      li.append(" ", b);
    }
    list.append(li);
  }
}

const policyLinter = linter(async (view) => {
  const text = view.state.doc.toString();
  const res = await call("check", text);
  if (view.state.doc.toString() !== text) {
    return lastDiagnostics;          // typed meanwhile: the next run answers
  }
  renderProblems(view, res.diagnostics);
  lastDiagnostics = res.diagnostics.map((d) => ({
    from: Math.min(d.from, view.state.doc.length),
    to: Math.min(Math.max(d.to, d.from), view.state.doc.length),
    severity: SEVERITY[d.severity] ?? "error",
    message: d.message,
    renderMessage: () => {
      const span = document.createElement("span");
      const a = document.createElement("a");
      a.href = d.url;
      a.target = "_blank";
      a.rel = "noopener";
      a.className = "diag-code";
      a.textContent = d.code;
      span.append(a, " ", d.message);
      for (const r of d.related) {
        const note = document.createElement("div");
        note.className = "diag-related";
        note.textContent = `${r.line}:${r.column}: ${r.message}`;
        span.append(note);
      }
      return span;
    },
    actions: d.fixes.map((f) => ({ name: f.title, apply: (v) => applyEdits(v, f.edits) })),
  }));
  window.playground.diagnostics = res.diagnostics;
  document.body.dataset.checked = String(++window.playground.checks);
  return lastDiagnostics;
}, { delay: 250 });

const policyHover = hoverTooltip(async (view, pos) => {
  const text = view.state.doc.toString();
  const h = await call("hover", text, pos);
  if (h === null || view.state.doc.toString() !== text) {
    return null;
  }
  return {
    pos: h.from,
    end: h.to,
    above: true,
    create: () => {
      const dom = document.createElement("div");
      dom.className = "hover-doc";
      dom.innerHTML = markdown(h.markdown);
      return { dom };
    },
  };
}, { hoverTime: 250 });

async function formatDocument(view) {
  const text = view.state.doc.toString();
  const res = await call("format_policy", text);
  if (res.error !== undefined) {
    setNote("format-status", res.error, "error");
    return false;
  }
  if (view.state.doc.toString() === text && res.text !== text) {
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: res.text } });
  }
  setNote("format-status", "formatted", "ok");
  return true;
}

function setNote(id, text, kind) {
  const el = $(id);
  el.textContent = text;
  el.dataset.kind = kind;
}

// ------------------------------------------------------------------ traces and replay
let traceKey = null;          // what the worker holds: "synth:preset:steps:seed" or "file:NAME"
let droppedFile = null;       // {name, bytes} of a dropped trace

function traceSource() {
  return document.querySelector('input[name="trace-source"]:checked').value;
}

async function ensureTrace() {
  if (traceSource() === "file") {
    if (droppedFile === null) {
      throw new Error("drop a .mpltrace or .jsonl file first (or choose a synthetic trace)");
    }
    const key = `file:${droppedFile.name}:${droppedFile.bytes.length}`;
    if (key !== traceKey) {
      const res = await call("load_trace", droppedFile.name, droppedFile.bytes);
      if (res.error !== undefined) {
        throw new Error(res.error);
      }
      traceKey = key;
      showTrace(res);
    }
    return;
  }
  const preset = $("preset").value;
  const steps = Number($("steps").value);
  const seed = Number($("seed").value);
  const key = `synth:${preset}:${steps}:${seed}`;
  if (key !== traceKey) {
    const res = await call("synth", preset, steps, seed);
    if (res.error !== undefined) {
      throw new Error(res.error);
    }
    traceKey = key;
    showTrace(res);
  }
}

function showTrace(t) {
  $("trace-info").textContent =
    `${t.label}: ${t.model ?? "model ?"}, ${t.moe_layers} MoE layers × ${t.experts} experts, top-${t.top_k}, ` +
    `${t.dispatches} dispatches, ${t.steps} steps`;
}

function pct(x) {
  return x === null || x === undefined ? "–" : `${(100 * x).toFixed(2)} %`;
}

function setResult(id, raw, text) {
  const el = $(id);
  el.textContent = text;
  el.dataset.raw = raw === null || raw === undefined ? "" : String(raw);
}

const RESULT_CELLS = ["r-hit-rate", "r-belady", "r-gap", "r-tokens", "r-step", "r-accesses", "r-loads",
  "r-evictions", "r-prefetch"];

/** No results on screen: after a failed replay, the numbers of an earlier one would read as
 * this policy's. */
function clearResults() {
  for (const id of RESULT_CELLS) {
    setResult(id, null, "");
  }
  $("r-summary").textContent = "";
  showTiers(null);
  $("plot").replaceChildren();
  $("results").hidden = true;
  window.playground.report = null;
  window.playground.sweep = null;
}

/** A policy with memory tiers: what each tier served, moved and read (the report's table,
 * from the replay's stats; nothing is computed here). */
function showTiers(stats) {
  const rows = stats && stats.tiers;
  const body = $("r-tiers-table").querySelector("tbody");
  body.replaceChildren();
  $("r-tiers").hidden = !rows;
  if (!rows) {
    return;
  }
  const several = new Set(rows.map((t) => t.set)).size > 1;
  for (const t of rows) {
    const tr = document.createElement("tr");
    const cells = [(several ? `[${t.set}] ` : "") + t.tier, t.location, t.dtype || "–",
      t.capacity === null ? "–" : String(t.capacity),
      `${t.hits} (${pct(t.hits / Math.max(stats.accesses, 1))})`, String(t.approximate),
      String(t.promotions), String(t.demotions), String(t.evictions),
      `${(t.bytes_read / 1e9).toFixed(2)} GB`];
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = c;
      tr.append(td);
    }
    body.append(tr);
  }
  $("r-tiers-note").textContent =
    `${stats.approximate_computes} accesses computed from a lower-precision copy`;
}

function showReport(r) {
  const s = r.stats;
  setResult("r-hit-rate", s.hit_rate, pct(s.hit_rate));
  setResult("r-belady", r.belady ? r.belady.hit_rate : null, r.belady ? pct(r.belady.hit_rate) : "–");
  setResult("r-gap", r.gap, r.gap === null ? "–" : `${(100 * r.gap).toFixed(2)} pp`);
  setResult("r-tokens", r.sim.tokens_per_s, `${r.sim.tokens_per_s.toFixed(2)} tok/s`);
  setResult("r-step", r.sim.time_per_step_ms, `${r.sim.time_per_step_ms.toFixed(2)} ms`);
  setResult("r-accesses", s.accesses, `${s.hits} / ${s.accesses}`);
  setResult("r-loads", s.loads, `${s.loads} (${(s.bytes_loaded / 1e9).toFixed(2)} GB)`);
  setResult("r-evictions", s.evictions, String(s.evictions));
  setResult("r-prefetch", s.prefetch_accuracy, s.prefetch_issued ? `${s.prefetch_useful} / ${s.prefetch_issued} useful` : "none");
  $("r-summary").textContent = `policy ${r.policy} on ${r.trace_label}, hardware ${r.hardware.name}`;
  showTiers(s);
  $("results").hidden = false;
}

let busy = false;
async function runReplay() {
  if (busy) {
    return;
  }
  busy = true;
  $("replay").disabled = true;
  $("results").classList.add("stale");      // dimmed until this replay's numbers replace them
  const text = window.playground.view.state.doc.toString();
  const hw = $("hardware").value;
  let reported = false;
  try {
    setNote("replay-status", "preparing the trace…", "busy");
    await ensureTrace();
    setNote("replay-status", "replaying…", "busy");
    const t0 = performance.now();
    const r = await call("replay", text, hw);
    if (r.error !== undefined) {
      throw new Error(r.error);
    }
    showReport(r);
    window.playground.report = r;
    reported = true;
    $("plot").replaceChildren();            // the earlier policy's curve is not this one's
    window.playground.sweep = null;
    setNote("replay-status", "hit rate vs capacity…", "busy");
    const sw = await call("sweep", text, hw);
    if (sw.error !== undefined) {
      throw new Error(sw.error);
    }
    renderPlot($("plot"), sw.points, { own: sw.own, perLayer: sw.per_layer, policy: r.policy });
    window.playground.sweep = sw;
    setNote("replay-status", `done in ${((performance.now() - t0) / 1000).toFixed(1)} s`, "ok");
    document.body.dataset.replays = String(++window.playground.replays);
  } catch (err) {
    if (!reported) {
      clearResults();
    }
    setNote("replay-status", err.message, "error");
    document.body.dataset.replayErrors = String(++window.playground.replayErrors);
  } finally {
    busy = false;
    $("replay").disabled = false;
    $("results").classList.remove("stale");
  }
}

function setupDrop() {
  const zone = $("drop");
  const take = async (file) => {
    droppedFile = { name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) };
    document.querySelector('input[name="trace-source"][value="file"]').checked = true;
    $("drop-name").textContent = `${file.name} (${file.size} bytes)`;
    traceKey = null;
    try {
      await ensureTrace();
      setNote("replay-status", "trace loaded", "ok");
    } catch (err) {
      setNote("replay-status", err.message, "error");
    }
  };
  for (const el of [zone, document.body]) {
    el.addEventListener("dragover", (e) => {
      e.preventDefault();
      zone.classList.add("over");
    });
    el.addEventListener("dragleave", () => zone.classList.remove("over"));
    el.addEventListener("drop", (e) => {
      e.preventDefault();
      zone.classList.remove("over");
      const f = e.dataTransfer?.files?.[0];
      if (f) {
        void take(f);
      }
    });
  }
  $("trace-file").addEventListener("change", (e) => {
    const f = e.target.files?.[0];
    if (f) {
      void take(f);
    }
  });
}

// ------------------------------------------------------------------ share links
function shareState() {
  return {
    policy: window.playground.view.state.doc.toString(),
    preset: $("preset").value,
    steps: $("steps").value,
    seed: $("seed").value,
    hardware: $("hardware").value,
  };
}

async function makeShareLink() {
  const hash = await encodeShare(shareState());
  const url = new URL(window.location.href);
  url.hash = hash;
  window.history.replaceState(null, "", url);
  $("share-url").value = url.href;
  $("share-url").hidden = false;
  $("share-url").select();
  try {
    await navigator.clipboard.writeText(url.href);
    setNote("share-status", "link copied", "ok");
  } catch {
    setNote("share-status", "copy the link above", "ok");
  }
  return url.href;
}

// ------------------------------------------------------------------ start
/** A notice that stays until dismissed (the status line moves on as the page loads). */
function showNotice(text) {
  $("notice-text").textContent = text;
  $("notice").hidden = false;
}

async function main() {
  window.playground = { checks: 0, replays: 0, replayErrors: 0 };
  $("notice-close").onclick = () => {
    $("notice").hidden = true;
  };
  const shared = await decodeShare(window.location.hash).catch((err) => {
    showNotice(`This share link could not be read: ${err.message}. The default policy is shown instead.`);
    document.body.dataset.linkError = err.message;
    return null;
  });
  setStatus("loading Python (Pyodide) and mpl…", "busy");
  const [{ language }, info] = await Promise.all([
    textmateLanguage("assets/moe.tmLanguage.json", "assets/onig.wasm"),
    call("start"),
  ]);
  window.playground.info = info;
  setStatus(`mpl ${info.mpl} on Python ${info.python} (Pyodide ${info.pyodide}), ${info.backend} runtime`, "ok");

  for (const p of info.presets) {
    $("preset").append(new Option(`${p.name} (${p.moe_layers}×${p.experts}, top-${p.top_k})`, p.name));
  }
  for (const h of info.hardware) {
    $("hardware").append(new Option(h, h, h === info.default_hardware, h === info.default_hardware));
  }
  $("trace-file").accept = info.trace_extensions.join(",");
  const examples = await call("examples");
  for (const ex of examples) {
    $("examples").append(new Option(`std/${ex.name}`, ex.name));
  }

  const view = new EditorView({
    parent: $("editor"),
    state: EditorState.create({
      doc: shared?.policy ?? DEFAULT_POLICY,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), highlightActiveLine(), drawSelection(), history(),
        bracketMatching(), closeBrackets(), indentOnInput(), indentUnit.of("    "),
        language, syntaxHighlighting(scopeHighlighter),
        policyLinter, lintGutter(), policyHover,
        keymap.of([
          { key: "Shift-Alt-f", run: (v) => { void formatDocument(v); return true; } },
          { key: "Mod-Enter", run: () => { void runReplay(); return true; } },
          ...closeBracketsKeymap, ...defaultKeymap, ...historyKeymap, ...lintKeymap, indentWithTab,
        ]),
        EditorView.updateListener.of((u) => {
          if (u.docChanged) {
            $("share-url").hidden = true;
            setNote("format-status", "", "");
          }
        }),
      ],
    }),
  });
  window.playground.view = view;
  window.playground.forceLinting = () => forceLinting(view);

  if (shared !== null) {
    if (shared.preset && info.presets.some((p) => p.name === shared.preset)) {
      $("preset").value = shared.preset;
    }
    for (const k of ["steps", "seed"]) {
      if (shared[k] !== undefined && /^\d+$/.test(shared[k])) {
        $(k).value = shared[k];
      }
    }
    if (shared.hardware && info.hardware.includes(shared.hardware)) {
      $("hardware").value = shared.hardware;
    }
  }

  $("examples").addEventListener("change", (e) => {
    const ex = examples.find((x) => x.name === e.target.value);
    if (ex) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: ex.text } });
    }
    e.target.value = "";
  });
  $("format").onclick = () => void formatDocument(view);
  $("replay").onclick = () => void runReplay();
  $("share").onclick = () => {
    $("notice").hidden = true;
    void makeShareLink();
  };
  setupDrop();
  // usable from here on (disabled in the HTML: before now they could do nothing)
  for (const id of ["replay", "format", "share", "examples"]) {
    $(id).disabled = false;
  }
  document.body.dataset.ready = "true";
  window.playground.makeShareLink = makeShareLink;
}

main().catch((err) => {
  setStatus(`the playground failed to start: ${err.message}`, "error");
  document.body.dataset.ready = "failed";
});
