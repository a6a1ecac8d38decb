// The sessions page: the tenant's sessions, newest first, paged, filtered
// by labels, each with its context bar; rows follow the tenant-wide status
// stream live.
import { h, comma, ago } from "./dom.js";
import { bar } from "./bar.js";
import { client, sessionRow, spendText, lastText, percentText, percentTitle, warningLabel, watch, StatusEvent, type SessionRow, type StatusPoint, type Usage } from "./api.js";
import type { Page } from "./main.js";

const PAGE = 25;

export function parseLabels(text: string): Record<string, string> | string {
  const out: Record<string, string> = {};
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const i = part.indexOf("=");
    if (i <= 0) return `"${part}" is not key=value`;
    out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

export async function sessionsPage(pg: Page, params: URLSearchParams): Promise<void> {
  const filter = params.get("labels") ?? "";
  const token = params.get("page") ?? "";
  const labels = parseLabels(filter);
  const form = h(
    "form",
    { class: "filter", role: "search", onsubmit: (e: Event) => {
      e.preventDefault();
      const v = (form.querySelector("input") as HTMLInputElement).value.trim();
      location.hash = v ? `#/?labels=${encodeURIComponent(v)}` : "#/";
    } },
    h("label", {}, "Labels", h("input", { type: "text", name: "labels", value: filter, placeholder: "team=search, env=prod", "aria-describedby": "labels-help" })),
    h("button", { type: "submit" }, "Filter"),
    h("span", { id: "labels-help", class: "muted" }, "key=value pairs, comma separated; sessions must have all of them"),
  );
  pg.main.replaceChildren(h("h1", {}, "Sessions"), form);
  if (typeof labels === "string") {
    pg.main.append(h("p", { class: "error", role: "alert" }, labels));
    return;
  }
  const res = await client.listSessions({ pageSize: PAGE, pageToken: token, labels });
  const rows = res.sessions.map(sessionRow);
  const tbody = h("tbody");
  const byId = new Map<string, HTMLElement>();
  for (const r of rows) {
    const tr = row(r);
    byId.set(r.id, tr);
    tbody.append(tr);
  }
  const table = h(
    "table",
    { id: "sessions" },
    h("caption", { class: "sr-only" }, "Sessions, newest first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col" }, "Session"),
        h("th", { scope: "col", class: "hide-narrow" }, "Model"),
        h("th", { scope: "col", title: "Used tokens as a % of the usable window: the context window minus the output reserved for the reply (hover a figure for its share of the whole window)" }, "Context (% used)"),
        h("th", { scope: "col" }, "Level"),
        h("th", { scope: "col", class: "num hide-narrow" }, "Messages"),
        h("th", { scope: "col", class: "hide-narrow" }, "Last compaction"),
        h("th", { scope: "col", class: "hide-narrow" }, "Spend"),
        h("th", { scope: "col", class: "hide-narrow" }, "Updated"),
      ),
    ),
    tbody,
  );
  pg.main.append(rows.length ? table : h("p", { class: "muted", id: "no-sessions" }, filter ? "No session has these labels." : "No sessions yet."));
  const pager = h("div", { class: "pager" });
  if (token) pager.append(h("a", { href: filter ? `#/?labels=${encodeURIComponent(filter)}` : "#/" }, "First page"));
  if (res.nextPageToken) {
    const q = new URLSearchParams({ page: res.nextPageToken });
    if (filter) q.set("labels", filter);
    pager.append(h("a", { href: `#/?${q}` }, "Next page"));
  }
  pg.main.append(pager);

  // Live: every change of the tenant's sessions. A session this page does
  // not show yet (created after the page loaded) reloads the first page.
  let reload: ReturnType<typeof setTimeout> | undefined;
  void watch("", 0, pg.signal, (p: StatusPoint) => {
    const tr = byId.get(p.sessionId);
    if (!tr) {
      if (!token && p.event !== StatusEvent.DELETED && Object.keys(labels).length === 0 && reload === undefined) {
        reload = setTimeout(() => pg.refresh(), 300);
      }
      return;
    }
    update(tr, p);
  }, pg.conn);
}

function barCell(u: Usage): HTMLElement {
  return h("div", { class: "barcell" }, bar(u), h("span", { class: "pct", title: percentTitle(u) }, percentText(u)));
}

// warningBadges shows each warning in a few words, the full text as its
// tooltip (and to screen readers).
export function warningBadges(ws: string[]): HTMLElement {
  const box = h("span", { class: "warnings" });
  for (const w of [...new Set(ws)]) box.append(h("span", { class: "warn", title: w, "aria-label": `Warning: ${w}` }, `⚠ ${warningLabel(w)}`));
  return box;
}

function levelCell(td: HTMLElement, u: Usage, warnings: string[]): void {
  td.className = `level level-${u.level}`;
  td.replaceChildren(u.level, warningBadges(warnings));
}

function row(r: SessionRow): HTMLElement {
  const u = r.usage;
  const lv = h("td");
  levelCell(lv, u, r.warnings);
  return h(
    "tr",
    { "data-session": r.id, "data-version": r.version },
    h("td", {}, h("a", { href: `#/s/${encodeURIComponent(r.id)}` }, r.id)),
    h("td", { class: "hide-narrow" }, r.model),
    h("td", { class: "ctx" }, barCell(u)),
    lv,
    h("td", { class: "num msgs-count hide-narrow" }, comma(r.messageCount)),
    h("td", { class: "last hide-narrow" }, lastText(r.last)),
    h("td", { class: "spend hide-narrow" }, spendText(r.spend)),
    h("td", { class: "updated hide-narrow", title: r.updatedAt?.toISOString() ?? "" }, ago(r.updatedAt)),
  );
}

function update(tr: HTMLElement, p: StatusPoint): void {
  const have = Number(tr.dataset.version);
  // The stream's snapshot of a version the page already shows adds
  // nothing (and its time is when it was sent, not when the session
  // changed).
  if (have > p.version || (have === p.version && p.event === StatusEvent.SNAPSHOT)) return;
  tr.dataset.version = String(p.version);
  if (p.event === StatusEvent.DELETED) {
    tr.classList.add("deleted");
    (tr.querySelector(".level") as HTMLElement).textContent = "deleted";
    return;
  }
  const u = p.usage;
  (tr.querySelector(".ctx") as HTMLElement).replaceChildren(barCell(u));
  levelCell(tr.querySelector(".level") as HTMLElement, u, p.warnings);
  (tr.querySelector(".msgs-count") as HTMLElement).textContent = comma(u.messageCount);
  if (p.last) (tr.querySelector(".last") as HTMLElement).textContent = lastText(p.last);
  if (p.spend) (tr.querySelector(".spend") as HTMLElement).textContent = spendText(p.spend);
  const up = tr.querySelector(".updated") as HTMLElement;
  up.textContent = ago(p.at);
  up.title = p.at.toISOString();
}
