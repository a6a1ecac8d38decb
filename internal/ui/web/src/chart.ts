// The usage chart of one session: used tokens over the session's events
// (its start, each compaction and revert, every status the page has seen
// live, and now), with the prune, summarize and hand-off thresholds as
// lines. The x axis is the order of events with the time
// between them compressed: each step is one slot wide, plus a little more
// the longer the pause (logarithmic, at most two more slots), so a session
// filled in one burst is spread across the chart instead of piled at the
// left of a long idle stretch. Pauses over a minute are marked on the axis
// with their length. Every compaction is drawn where it happened (a drop
// from its tokens before to after), every revert too (a rise), each marker
// with its event on hover.
import { s, comma, short } from "./dom.js";
import type { CompactionRow, Usage } from "./api.js";

export interface Point {
  at: Date;
  used: number;
}

const W = 900, H = 300, L = 64, R = 16, T = 14, B = 34;

type Ev = {
  at: number;
  seq: number;
  used: number;
  kind: "start" | "compaction" | "revert" | "live" | "now";
  before?: number;
  c?: CompactionRow;
};

// slotWidth is how far apart two events are drawn, in slots, given the time
// between them.
export function slotWidth(gapMs: number): number {
  return 1 + Math.min(2, Math.log10(1 + Math.max(0, gapMs) / 1000) / 2);
}

function duration(ms: number): string {
  const s = ms / 1000;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86400) return `${(s / 3600).toFixed(s < 36000 ? 1 : 0)} h`;
  return `${Math.round(s / 86400)} d`;
}

export function chart(u: Usage, start: Point | undefined, compactions: CompactionRow[], live: Point[]): SVGElement {
  const evs: Ev[] = [];
  let seq = 0;
  if (start) evs.push({ at: start.at.getTime(), used: start.used, seq: seq++, kind: "start" });
  for (const c of compactions) {
    const at = c.createdAt?.getTime() ?? Date.now();
    evs.push({ at, used: c.after, before: c.before, seq: seq++, kind: "compaction", c });
    if (c.revertedAt) evs.push({ at: c.revertedAt.getTime(), used: NaN, seq: seq++, kind: "revert", c });
  }
  for (const p of live) evs.push({ at: p.at.getTime(), used: p.used, seq: seq++, kind: "live" });
  evs.push({ at: Math.max(Date.now(), ...evs.map((e) => e.at)), used: u.used, seq: seq++, kind: "now" });
  evs.sort((a, b) => a.at - b.at || a.seq - b.seq);
  // A revert brings back what its compaction saved (the next status has
  // the exact figure).
  let prev = evs[0].kind === "revert" ? u.used : evs[0].used;
  for (const e of evs) {
    if (e.kind === "revert" && e.c) e.used = prev + (e.c.before - e.c.after);
    prev = e.used;
  }

  // x: cumulative slots.
  const slots: number[] = [0];
  for (let i = 1; i < evs.length; i++) slots.push(slots[i - 1] + slotWidth(evs[i].at - evs[i - 1].at));
  const span = Math.max(slots[slots.length - 1], 1);
  const x = (i: number) => L + ((W - L - R) * slots[i]) / span;

  const usable = Math.max(u.window - u.reserved, 1);
  const ymax = Math.max(usable, ...evs.map((e) => Math.max(e.used, e.before ?? 0))) * 1.05;
  const y = (v: number) => T + (H - T - B) * (1 - v / ymax);

  const svg = s("svg", {
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-labelledby": "chart-title chart-desc",
    class: "usage-chart",
  });
  const reverts = compactions.filter((c) => c.revertedAt).length;
  svg.append(
    s("title", { id: "chart-title" }, "Used tokens, event by event"),
    s("desc", { id: "chart-desc" }, `${compactions.length} compaction${compactions.length === 1 ? "" : "s"}, ${reverts} revert${reverts === 1 ? "" : "s"}; now ${comma(u.used)} of ${comma(usable)} usable tokens (${u.percent.toFixed(1)} %). Pauses between events are compressed.`),
  );
  // Axes and y ticks.
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), s("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (let i = 0; i <= 4; i++) {
    const v = (ymax / 1.05) * (i / 4);
    svg.append(s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, short(v)));
  }
  svg.append(thresholds(u, usable, y));

  // The line: a step (level, then straight up or down) into every change
  // the page knows the version of (a status seen live, a revert); a ramp
  // into a compaction's tokens before and into now, since the appends
  // between the page's known points were not seen one by one; a
  // compaction drops straight down to its tokens after.
  const pts: [number, number][] = [[x(0), y(evs[0].before ?? evs[0].used)], [x(0), y(evs[0].used)]];
  for (let i = 1; i < evs.length; i++) {
    const e = evs[i];
    if (e.kind === "compaction" || e.kind === "now") {
      if (e.before !== undefined) pts.push([x(i), y(e.before)]);
    } else {
      pts.push([x(i), pts[pts.length - 1][1]]);
    }
    pts.push([x(i), y(e.used)]);
  }
  const coords = pts.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(" ");
  svg.append(s("polygon", { class: "area", points: `${L},${H - B} ${coords} ${x(evs.length - 1).toFixed(1)},${H - B}` }));
  svg.append(s("polyline", { class: "used", points: coords }));

  // Compressed pauses (over a minute), marked on the axis.
  for (let i = 1; i < evs.length; i++) {
    const gap = evs[i].at - evs[i - 1].at;
    if (gap < 60_000) continue;
    const gx = (x(i - 1) + x(i)) / 2;
    const g = s("g", { class: "gap-mark" }, s("line", { class: "gap", x1: gx - 3, y1: H - B + 5, x2: gx + 3, y2: H - B - 5 }),
      s("text", { x: gx, y: H - B + 16, "text-anchor": "middle" }, `⋯ ${duration(gap)}`));
    g.append(s("title", {}, `${duration(gap)} without changes (compressed)`));
    svg.append(g);
  }
  const fmt = (t: number) => new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  svg.append(s("text", { x: L, y: H - 4 }, fmt(evs[0].at)), s("text", { x: W - R, y: H - 4, "text-anchor": "end" }, `now ${fmt(evs[evs.length - 1].at)}`));

  // Markers: one per compaction (at its tokens before) and per revert.
  evs.forEach((e, i) => {
    if (!e.c) return;
    const c = e.c;
    if (e.kind === "compaction") {
      const m = s("circle", { class: c.revertedAt ? "marker reverted" : "marker", cx: x(i).toFixed(1), cy: y(e.before ?? e.used).toFixed(1), r: 6, "data-compaction": c.id, tabindex: 0 });
      m.append(s("title", {}, `Compaction ${c.round} (${c.tiers.join(", ")}) at ${fmt(e.at)}: ${comma(c.before)} → ${comma(c.after)} tokens, saved ${comma(c.before - c.after)}${c.revertedAt ? "; reverted later" : ""}`));
      svg.append(m);
    } else {
      const cx = x(i), cy = y(e.used);
      const m = s("path", { class: "revert", d: `M${cx.toFixed(1)},${(cy - 7).toFixed(1)} l7,7 l-7,7 l-7,-7 z`, "data-revert": c.id, "data-x": cx.toFixed(1), tabindex: 0 });
      m.append(s("title", {}, `Revert of compaction ${c.round} at ${fmt(e.at)}: the ${comma(c.before - c.after)} tokens it saved are back in the view`));
      svg.append(m);
    }
  });
  return svg;
}

// thresholds draws the policy's thresholds as dashed lines; equal ones
// share one label ("prune · summarize 65 %") and labels closer than a line
// of text are moved apart, so none is printed over another.
function thresholds(u: Usage, usable: number, y: (v: number) => number): SVGElement {
  const g = s("g", { class: "thresholds" });
  const named: [string, string, number][] = [
    ["warning", "prune", u.warning],
    ["critical", "summarize", u.critical],
    ["emergency", "hand-off", u.emergency],
  ];
  const groups: { cls: string; names: string[]; pct: number }[] = [];
  for (const [cls, name, f] of named) {
    if (!(f > 0)) continue;
    const pct = Math.round(f * 1000) / 10;
    const same = groups.find((x) => x.pct === pct);
    if (same) same.names.push(name);
    else groups.push({ cls, names: [name], pct });
  }
  groups.sort((a, b) => b.pct - a.pct); // top of the chart first
  let lastY = -Infinity;
  for (const t of groups) {
    const yy = y((t.pct / 100) * usable);
    let ty = yy - 4;
    if (ty < lastY + 13) ty = lastY + 13; // a line of 11 px text below the previous label
    lastY = ty;
    g.append(s("g", { class: `th th-${t.cls}`, "data-threshold": t.names.join(" · ") },
      s("line", { x1: L, y1: yy, x2: W - R, y2: yy }),
      s("text", { x: W - R - 4, y: ty, "text-anchor": "end" }, `${t.names.join(" · ")} ${t.pct} %`)));
  }
  return g;
}
