// A static file server for playground/dist/ (the page needs http: workers and fetch do not
// run from file://). Usage: node scripts/serve.mjs [--port N] [--root DIR]; prints the URL.
import { createReadStream, statSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";

const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".mjs": "text/javascript",
  ".css": "text/css", ".json": "application/json", ".wasm": "application/wasm", ".map": "application/json",
  ".py": "text/plain; charset=utf-8", ".whl": "application/zip", ".zip": "application/zip", ".png": "image/png" };

export function serve(root, port = 0, host = "127.0.0.1") {
  const base = path.resolve(root);
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    let file = path.normalize(path.join(base, decodeURIComponent(url.pathname)));
    if (file !== base && !file.startsWith(base + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    try {
      if (statSync(file).isDirectory()) {
        file = path.join(file, "index.html");
      }
      const size = statSync(file).size;
      res.writeHead(200, { "content-type": TYPES[path.extname(file)] ?? "application/octet-stream", "content-length": size,
        "cache-control": "no-cache" });
      createReadStream(file).pipe(res);
    } catch {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found");
    }
  });
  return new Promise((resolve) => server.listen(port, host, () => resolve(server)));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
  const here = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
  const server = await serve(opt("--root", path.join(here, "dist")), Number(opt("--port", 8000)));
  const { port } = server.address();
  console.log(`playground at http://127.0.0.1:${port}/`);
}
