// The hit-rate-vs-capacity plot (SVG): the policy's hit rate and Belady's optimum at each
// capacity of the sweep, on a log-scaled capacity axis, the policy's own capacity marked.
const NS = "http://www.w3.org/2000/svg";
const W = 560;
const H = 300;
const M = { left: 52, right: 16, top: 16, bottom: 44 };

function el(name, attrs = {}, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) {
    e.setAttribute(k, String(v));
  }
  if (text !== undefined) {
    e.textContent = text;
  }
  return e;
}

export function renderPlot(container, points, { own = null, perLayer = false, policy = "policy" } = {}) {
  const pts = points.filter((p) => p.error === null && p.hit_rate !== null);
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "plot",
    "aria-label": `hit rate of ${policy} and Belady's optimum by capacity` });
  container.replaceChildren(svg);
  if (pts.length === 0) {
    svg.append(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no point of the sweep replayed"));
    return;
  }
  const caps = pts.map((p) => p.capacity);
  const lo = Math.log(Math.min(...caps));
  const hi = Math.log(Math.max(...caps));
  const x = (c) => M.left + (hi === lo ? 0.5 : (Math.log(c) - lo) / (hi - lo)) * (W - M.left - M.right);
  const y = (v) => H - M.bottom - v * (H - M.top - M.bottom);

  for (let v = 0; v <= 1.0001; v += 0.25) {
    svg.append(el("line", { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(el("text", { x: M.left - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, `${Math.round(v * 100)}%`));
  }
  for (const c of caps) {
    svg.append(el("text", { x: x(c), y: H - M.bottom + 16, "text-anchor": "middle", class: "tick" }, String(c)));
  }
  svg.append(el("text", { x: (M.left + W - M.right) / 2, y: H - 6, "text-anchor": "middle", class: "axis" },
    perLayer ? "capacity per layer (slots)" : "capacity of the shared cache (slots)"));
  if (own !== null && own >= Math.min(...caps) && own <= Math.max(...caps)) {
    svg.append(el("line", { x1: x(own), x2: x(own), y1: M.top, y2: H - M.bottom, class: "own" }));
    svg.append(el("text", { x: x(own) + 4, y: M.top + 10, class: "tick" }, `${policy}: ${own}`));
  }
  const series = [
    { key: "belady", cls: "belady", label: "Belady (optimum)" },
    { key: "hit_rate", cls: "policy", label: policy },
  ];
  series.forEach((s, i) => {
    const ps = pts.filter((p) => p[s.key] !== null && p[s.key] !== undefined);
    svg.append(el("polyline", { points: ps.map((p) => `${x(p.capacity)},${y(p[s.key])}`).join(" "), class: `line ${s.cls}` }));
    for (const p of ps) {
      const c = el("circle", { cx: x(p.capacity), cy: y(p[s.key]), r: 3.5, class: `dot ${s.cls}`,
        "data-capacity": p.capacity, "data-value": p[s.key] });
      c.append(el("title", {}, `${s.label} at ${p.capacity}: ${(100 * p[s.key]).toFixed(2)}%`));
      svg.append(c);
    }
    svg.append(el("rect", { x: M.left + 10, y: M.top + 4 + 16 * i, width: 12, height: 3, class: `key ${s.cls}` }));
    svg.append(el("text", { x: M.left + 28, y: M.top + 9 + 16 * i, class: "legend" }, s.label));
  });
}
