// A small line chart in SVG, drawn from numbers: the live CPU and memory
// of a sandbox (fed by `event: usage` of GET /v1/events, no polling).
const NS = "http://www.w3.org/2000/svg";

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

export function lineChart(id: string, title: string, values: number[], fmt: (v: number) => string, floorMax = 1): HTMLElement {
  const W = 320, H = 90, P = 4;
  const max = Math.max(floorMax, ...values) * 1.1;
  const last = values.length ? fmt(values[values.length - 1]) : "no samples yet";
  const fig = document.createElement("figure");
  fig.className = "chart";
  fig.id = id;
  fig.dataset.points = String(values.length);
  const cap = document.createElement("figcaption");
  cap.textContent = `${title}: ${last}`;
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title}, last ${values.length} samples, now ${last}` });
  s.append(svg("line", { x1: 0, y1: H - P, x2: W, y2: H - P, class: "axis" }));
  if (values.length > 1) {
    const step = (W - 2 * P) / (values.length - 1);
    const pts = values.map((v, i) => `${(P + i * step).toFixed(1)},${(H - P - (v / max) * (H - 2 * P)).toFixed(1)}`).join(" ");
    s.append(svg("polyline", { points: pts, class: "line", fill: "none" }));
  }
  fig.append(cap, s);
  return fig;
}
