// The usage chart of one session: used tokens over time, with the prune,
// summarize and hand-off thresholds as lines and one marker per compaction
// (the sawtooth of a long agent session). The history is rebuilt from what
// the server keeps: the session's start (system prompt and tools), each
// compaction's tokens before and after, and every status the page has seen
// live since it opened.
import { s, comma, short } from "./dom.js";
import type { CompactionRow, Usage } from "./api.js";

export interface Point {
  at: Date;
  used: number;
}

const W = 900, H = 300, L = 64, R = 16, T = 14, B = 34;

export function chart(u: Usage, start: Point | undefined, compactions: CompactionRow[], live: Point[]): SVGElement {
  type P = { at: number; used: number; seq: number; marker?: CompactionRow };
  const pts: P[] = [];
  let seq = 0;
  if (start) pts.push({ at: start.at.getTime(), used: start.used, seq: seq++ });
  for (const c of compactions) {
    const at = c.createdAt?.getTime() ?? Date.now();
    pts.push({ at, used: c.before, seq: seq++ });
    pts.push({ at, used: c.after, seq: seq++, marker: c });
  }
  for (const p of live) pts.push({ at: p.at.getTime(), used: p.used, seq: seq++ });
  pts.push({ at: Date.now(), used: u.used, seq: seq++ });
  pts.sort((a, b) => a.at - b.at || a.seq - b.seq);

  const usable = Math.max(u.window - u.reserved, 1);
  const ymax = Math.max(usable, ...pts.map((p) => p.used)) * 1.05;
  const t0 = pts[0].at, t1 = pts[pts.length - 1].at;
  // Proportional to time, unless everything happened within a second
  // (a scripted session): then one step per event.
  const byTime = t1 - t0 >= 1000;
  const x = (p: P, i: number) => L + ((W - L - R) * (byTime ? (p.at - t0) / (t1 - t0) : pts.length > 1 ? i / (pts.length - 1) : 0));
  const y = (v: number) => T + (H - T - B) * (1 - v / ymax);

  const svg = s("svg", {
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-labelledby": "chart-title chart-desc",
    class: "usage-chart",
  });
  svg.append(
    s("title", { id: "chart-title" }, "Used tokens over time"),
    s("desc", { id: "chart-desc" }, `${compactions.length} compaction${compactions.length === 1 ? "" : "s"}; now ${comma(u.used)} of ${comma(usable)} usable tokens (${u.percent.toFixed(1)} %).`),
  );
  // Axes and y ticks.
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), s("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (let i = 0; i <= 4; i++) {
    const v = (ymax / 1.05) * (i / 4);
    svg.append(s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, short(v)));
  }
  // Thresholds, as fractions of the usable window.
  const th: [string, string, number][] = [
    ["warning", "prune", u.warning],
    ["critical", "summarize", u.critical],
    ["emergency", "hand-off", u.emergency],
  ];
  for (const [cls, name, f] of th) {
    if (!(f > 0)) continue;
    const yy = y(f * usable);
    svg.append(s("g", { class: `th th-${cls}` }, s("line", { x1: L, y1: yy, x2: W - R, y2: yy }), s("text", { x: W - R - 4, y: yy - 4, "text-anchor": "end" }, `${name} ${Math.round(f * 100)} %`)));
  }
  // The line and the area under it.
  const coords = pts.map((p, i) => `${x(p, i).toFixed(1)},${y(p.used).toFixed(1)}`);
  svg.append(s("polygon", { class: "area", points: `${L},${H - B} ${coords.join(" ")} ${x(pts[pts.length - 1], pts.length - 1).toFixed(1)},${H - B}` }));
  svg.append(s("polyline", { class: "used", points: coords.join(" ") }));
  // Time labels at both ends.
  const fmt = (t: number) => new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  svg.append(s("text", { x: L, y: H - 12 }, fmt(t0)), s("text", { x: W - R, y: H - 12, "text-anchor": "end" }, fmt(t1)));
  // One marker per compaction.
  pts.forEach((p, i) => {
    if (!p.marker) return;
    const c = p.marker;
    const m = s("circle", {
      class: c.revertedAt ? "marker reverted" : "marker",
      cx: x(p, i).toFixed(1),
      cy: y(p.used).toFixed(1),
      r: 6,
      "data-compaction": c.id,
    });
    m.append(s("title", {}, `Compaction ${c.round} (${c.tiers.join(", ")}): ${comma(c.before)} → ${comma(c.after)} tokens${c.revertedAt ? ", reverted" : ""}`));
    svg.append(m);
  });
  return svg;
}
