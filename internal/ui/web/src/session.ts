// The page of one session: its bar, the usage chart, the compaction history
// (with dry run, compact and revert, each behind a confirmation where it
// changes anything), and the active view, where a summary or placeholder
// opens the originals it stands in for.
import { h, comma, ago, confirmDialog } from "./dom.js";
import { bar, legend } from "./bar.js";
import { chart, type Point } from "./chart.js";
import {
  client,
  sessionRow,
  compactionRow,
  messageRow,
  spendText,
  lastText,
  percentText,
  type Spend,
  watch,
  errorText,
  StatusEvent,
  MessageView,
  type CompactionRow,
  type Usage,
} from "./api.js";
import type { Page } from "./main.js";

// The page reads at most this many pages of a paged list (ListCompactions,
// ExpandMessage originals), each bounded by the server's response cap.
const MAX_PAGES = 50;

// allCompactions follows ListCompactions' page tokens (oldest first).
async function allCompactions(sessionId: string): Promise<CompactionRow[]> {
  const out: CompactionRow[] = [];
  let pageToken = "";
  for (let i = 0; i < MAX_PAGES; i++) {
    const res = await client.listCompactions({ sessionId, pageSize: 1000, pageToken });
    out.push(...res.compactions.map(compactionRow));
    pageToken = res.nextPageToken;
    if (!pageToken) break;
  }
  return out;
}

// allOriginals follows ExpandMessage's page tokens.
async function allOriginals(sessionId: string, messageId: string): Promise<{ rows: ReturnType<typeof messageRow>[]; more: boolean }> {
  const rows: ReturnType<typeof messageRow>[] = [];
  let pageToken = "";
  for (let i = 0; i < MAX_PAGES; i++) {
    const res = await client.expandMessage({ sessionId, messageId, pageToken });
    rows.push(...res.originals.map(messageRow));
    pageToken = res.nextPageToken;
    if (!pageToken) return { rows, more: false };
  }
  return { rows, more: true };
}

export async function sessionPage(pg: Page, id: string): Promise<void> {
  const [got, hist, view] = await Promise.all([
    client.getSession({ sessionId: id }),
    allCompactions(id),
    client.getMessages({ sessionId: id, view: MessageView.ACTIVE, pageSize: 200 }),
  ]);
  const sess = sessionRow(got.session!);
  let u: Usage = sess.usage;
  let sp: Spend | undefined = sess.spend;
  let last = sess.last;
  let compactions: CompactionRow[] = hist;
  const live: Point[] = [];
  const start: Point | undefined = sess.createdAt ? { at: sess.createdAt, used: u.system + u.tools } : undefined;

  const title = h("h1", {}, `Session ${sess.id}`);
  const meta = h("p", { class: "muted", id: "session-meta" });
  const warnBox = h("ul", { id: "session-warnings", "aria-live": "polite" });
  let warnings: string[] = sess.warnings;
  const barBox = h("div", { id: "session-bar" });
  const chartBox = h("div", { class: "chart", id: "usage-chart" });
  const actionMsg = h("div", { id: "action-result", role: "status", "aria-live": "polite" });
  const histBox = h("div", { id: "compactions" });
  const msgsBox = h("div", { id: "messages" });

  const drawHead = () => {
    meta.textContent = `${sess.model} · ${comma(u.window)}-token window · version ${sess.version} · ${comma(u.messageCount)} messages in view · ${percentText(u)} used · level ${u.level} · last compaction ${lastText(last)} · spend ${spendText(sp)}`;
    warnBox.replaceChildren(...[...new Set(warnings)].map((w) => h("li", { class: "warning" }, `⚠ ${w}`)));
    barBox.replaceChildren(bar(u, true), legend(u));
  };
  const drawChart = () => chartBox.replaceChildren(chart(u, start, compactions, live));
  const drawHistory = () => histBox.replaceChildren(historyTable(compactions, revert));
  const drawMessages = (rows: ReturnType<typeof messageRow>[], more: boolean) => msgsBox.replaceChildren(messagesList(id, rows, more, compactions));

  const reload = async () => {
    const [h2, v2] = await Promise.all([allCompactions(id), client.getMessages({ sessionId: id, view: MessageView.ACTIVE, pageSize: 200 })]);
    compactions = h2;
    drawHistory();
    drawChart();
    drawMessages(v2.messages.map(messageRow), v2.nextPageToken !== "");
  };

  async function revert(c: CompactionRow): Promise<void> {
    const ok = await confirmDialog(
      `Revert compaction ${c.round}?`,
      `The active view goes back to what it was before this compaction (${comma(c.before)} tokens); messages appended since stay.`,
      "Revert",
    );
    if (!ok) return;
    try {
      const res = await client.revertCompaction({ sessionId: id, compactionId: c.id });
      actionMsg.replaceChildren(h("p", {}, `Reverted compaction ${c.round}; now ${comma(Number(res.session?.usage?.usedTokens ?? 0))} tokens.`));
      await reload();
    } catch (e) {
      actionMsg.replaceChildren(h("p", { class: "error", role: "alert" }, errorText(e)));
    }
  }

  const dry = async () => {
    try {
      const res = await client.compact({ sessionId: id, dryRun: true });
      if (!res.compaction) {
        actionMsg.replaceChildren(h("p", { id: "nothing-to-compact" }, "Dry run: nothing to compact", res.nothingDetail ? `: ${res.nothingDetail}.` : ".", ...res.warnings.map((w) => ` ${w}`)));
        return;
      }
      const c = compactionRow(res.compaction);
      const apply = h("button", { type: "button", class: "primary", id: "apply-compaction" }, "Compact now…");
      apply.addEventListener("click", async () => {
        const ok = await confirmDialog("Compact this session?", `Tiers ${c.tiers.join(", ")}: ${comma(c.before)} → ${comma(c.after)} tokens. Reversible with Revert.`, "Compact");
        if (!ok) return;
        try {
          const done = await client.compact({ sessionId: id });
          actionMsg.replaceChildren(h("p", {}, done.compaction ? "Compacted." : `Nothing compacted: ${done.nothingDetail || "the view changed since the dry run"}.`));
          await reload();
        } catch (e) {
          actionMsg.replaceChildren(h("p", { class: "error", role: "alert" }, errorText(e)));
        }
      });
      actionMsg.replaceChildren(
        h("div", { class: "panel", id: "dry-run" },
          h("p", {}, `Dry run: ${c.tiers.join(", ")} would take ${comma(c.before)} → ${comma(c.after)} tokens (saves ${comma(c.before - c.after)}) in ${c.items} replacement${c.items === 1 ? "" : "s"}. Nothing was changed.`),
          ...res.warnings.map((w) => h("p", { class: "muted" }, w)),
          apply),
      );
    } catch (e) {
      actionMsg.replaceChildren(h("p", { class: "error", role: "alert" }, errorText(e)));
    }
  };

  pg.main.replaceChildren(
    h("p", {}, h("a", { href: "#/" }, "← Sessions")),
    title,
    meta,
    warnBox,
    barBox,
    h("div", { class: "toolbar" }, h("button", { type: "button", id: "dry-run-button", onclick: dry }, "Dry-run compaction")),
    actionMsg,
    h("h2", {}, "Usage"),
    chartBox,
    h("h2", {}, "Compactions"),
    histBox,
    h("h2", {}, "Active view"),
    msgsBox,
  );
  drawHead();
  drawChart();
  drawHistory();
  drawMessages(view.messages.map(messageRow), view.nextPageToken !== "");

  void watch(id, sess.version, pg.signal, (p) => {
    if (p.version <= sess.version && p.event !== StatusEvent.SNAPSHOT) return;
    sess.version = Math.max(sess.version, p.version);
    if (p.event === StatusEvent.DELETED) {
      actionMsg.replaceChildren(h("p", { class: "error", role: "alert" }, "This session was deleted."));
      return;
    }
    u = p.usage;
    sp = p.spend ?? sp;
    last = p.last ?? last;
    warnings = p.warnings;
    live.push({ at: p.at, used: u.used });
    if (live.length > 2000) live.shift();
    drawHead();
    if (p.compacted || p.event === StatusEvent.COMPACTED || p.event === StatusEvent.REVERTED || p.event === StatusEvent.UPDATED) void reload();
    else drawChart();
  }, pg.conn);
}

function historyTable(cs: CompactionRow[], revert: (c: CompactionRow) => void): HTMLElement {
  if (cs.length === 0) return h("p", { class: "muted" }, "No compactions yet.");
  const newest = [...cs].reverse().find((c) => !c.revertedAt);
  const tbody = h("tbody");
  for (const c of [...cs].reverse()) {
    tbody.append(
      h(
        "tr",
        { "data-compaction": c.id },
        h("td", { class: "num" }, String(c.round)),
        h("td", {}, c.tiers.join(", ")),
        h("td", { class: "num" }, `${comma(c.before)} → ${comma(c.after)}`),
        h("td", { class: "hide-narrow" }, c.reasons.join("; ") || "—"),
        h("td", { class: "hide-narrow" }, ago(c.createdAt)),
        h("td", {}, c.revertedAt ? `reverted ${ago(c.revertedAt)}` : "applied"),
        h("td", {}, c.revertedAt ? "" : h("button", {
          type: "button",
          disabled: c !== newest,
          title: c === newest ? "Undo this compaction" : "Revert the newer compactions first",
          "aria-label": `Revert compaction ${c.round}`,
          onclick: () => revert(c),
        }, "Revert…")),
      ),
    );
  }
  return h(
    "table",
    {},
    h("caption", { class: "sr-only" }, "Compaction history, newest first"),
    h("thead", {}, h("tr", {},
      h("th", { scope: "col", class: "num" }, "Round"),
      h("th", { scope: "col" }, "Tiers"),
      h("th", { scope: "col", class: "num" }, "Tokens"),
      h("th", { scope: "col", class: "hide-narrow" }, "Reason"),
      h("th", { scope: "col", class: "hide-narrow" }, "When"),
      h("th", { scope: "col" }, "State"),
      h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
    tbody,
  );
}

// logRange names the log messages a placeholder or summary stands in for:
// "#12–#15" when their ids are the server's msg_<position>, else the ids.
function logRange(ids: string[]): string {
  const pos = ids.map((i) => /^msg_(\d+)$/.exec(i)?.[1]).map(Number);
  if (ids.length > 0 && pos.every((p) => p > 0)) {
    const lo = Math.min(...pos), hi = Math.max(...pos);
    return lo === hi ? `log #${lo}` : `log #${lo}–#${hi}`;
  }
  return ids.length <= 3 ? ids.join(", ") : `${ids.slice(0, 2).join(", ")} … ${ids[ids.length - 1]}`;
}

// label names a message by where it is: its log position for an original,
// and for a placeholder or summary (which has no log position) its place
// in the view and what it stands in for.
function label(m: ReturnType<typeof messageRow>, index: number, compactions: CompactionRow[]): string {
  if (m.kind === "NORMAL" || m.position > 0) return `#${m.position}`;
  const what = m.kind === "SUMMARY" ? "summary" : "placeholder";
  for (const c of compactions) {
    const r = c.replaced.get(m.id);
    if (r) return `view ${index + 1} · ${what} of ${r.ids.length} message${r.ids.length === 1 ? "" : "s"} (${logRange(r.ids)}, ${r.tier} in round ${c.round})`;
  }
  return `view ${index + 1} · ${what}`;
}

function messagesList(sessionId: string, rows: ReturnType<typeof messageRow>[], more: boolean, compactions: CompactionRow[]): HTMLElement {
  const ol = h("ol", { class: "msgs" });
  rows.forEach((m, index) => {
    const li = h("li", { "data-message": m.id, "data-kind": m.kind });
    const preview = m.text.length > 600 ? m.text.slice(0, 600) + "…" : m.text;
    const metaRow = h("div", { class: "meta" },
      h("span", { class: "where" }, label(m, index, compactions)),
      h("span", {}, m.role),
      m.kind !== "NORMAL" ? h("span", { class: `kind-${m.kind}` }, m.kind.toLowerCase()) : null,
      h("span", {}, `${comma(m.tokens)} tokens`),
      m.pinned ? h("span", {}, "pinned") : null);
    li.append(metaRow, h("pre", {}, preview));
    if (m.kind === "SUMMARY" || m.kind === "PLACEHOLDER") {
      const box = h("div", { class: "originals", hidden: true, id: `orig-${m.id}` });
      const btn = h("button", { type: "button", class: "expand", "aria-expanded": "false", "aria-controls": `orig-${m.id}` }, "Show originals");
      btn.addEventListener("click", async () => {
        if (!box.hidden) {
          box.hidden = true;
          btn.setAttribute("aria-expanded", "false");
          btn.textContent = "Show originals";
          return;
        }
        try {
          const { rows: origs, more } = await allOriginals(sessionId, m.id);
          box.replaceChildren(
            h("p", { class: "muted" }, `${origs.length} original message${origs.length === 1 ? "" : "s"}, ${comma(origs.reduce((a, o) => a + o.tokens, 0))} tokens:`),
            ...(more ? [h("p", { class: "muted" }, `Only the first ${MAX_PAGES} pages of originals are shown.`)] : []),
            ...origs.map((o) => h("div", { class: "original", "data-message": o.id }, h("div", { class: "meta" }, h("span", {}, `#${o.position}`), h("span", {}, o.role), o.kind !== "NORMAL" ? h("span", { class: `kind-${o.kind}` }, o.kind.toLowerCase()) : null, h("span", {}, `${comma(o.tokens)} tokens`)), h("pre", {}, o.text))),
          );
        } catch (e) {
          box.replaceChildren(h("p", { class: "error", role: "alert" }, errorText(e)));
        }
        box.hidden = false;
        btn.setAttribute("aria-expanded", "true");
        btn.textContent = "Hide originals";
      });
      metaRow.append(btn);
      li.append(box);
    }
    ol.append(li);
  });
  const wrap = h("div", {}, ol);
  if (more) wrap.append(h("p", { class: "muted" }, "Only the first 200 messages of the view are shown."));
  return rows.length ? wrap : h("p", { class: "muted" }, "The active view is empty.");
}
