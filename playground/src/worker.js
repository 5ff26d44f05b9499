// The Python side of the page, in a Web Worker so that a replay never blocks typing:
// Pyodide (from ./pyodide/), the lark and mpl wheels unpacked into its site-packages, and
// the playground's glue module (mpl_playground.py). Requests are {id, fn, args}; each answer
// is {id, result} (the glue's JSON, parsed) or {id, error} (a Python exception: a bug, the
// glue answers bad input with {"error": ...} itself).

let glue = null;
let ready = null;

async function start() {
  const base = new URL("./", self.location.href);
  const manifest = await (await fetch(new URL("assets/manifest.json", base))).json();
  const { loadPyodide } = await import("./pyodide/pyodide.mjs");
  const py = await loadPyodide({ indexURL: new URL("pyodide/", base).href, packages: [] });
  for (const wheel of manifest.wheels) {
    const resp = await fetch(new URL(`wheels/${wheel}`, base));
    if (!resp.ok) {
      throw new Error(`wheels/${wheel}: HTTP ${resp.status}`);
    }
    py.unpackArchive(new Uint8Array(await resp.arrayBuffer()), "wheel");
  }
  const src = await (await fetch(new URL(manifest.glue, base))).text();
  py.FS.mkdirTree("/home/pyodide/playground");
  py.FS.writeFile("/home/pyodide/playground/mpl_playground.py", src);
  py.runPython("import sys; sys.path.insert(0, '/home/pyodide/playground')");
  glue = py.pyimport("mpl_playground");
  const info = JSON.parse(glue.info());
  info.commit = manifest.commit;
  info.pyodide = manifest.pyodide;
  return info;
}

self.onmessage = async (event) => {
  const { id, fn, args } = event.data;
  try {
    if (fn === "start") {
      ready = ready ?? start();
      self.postMessage({ id, result: await ready });
      return;
    }
    await ready;
    const out = glue[fn](...(args ?? []));
    self.postMessage({ id, result: JSON.parse(out) });
  } catch (err) {
    self.postMessage({ id, error: String(err?.message ?? err) });
  }
};
