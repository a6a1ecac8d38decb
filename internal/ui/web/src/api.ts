// The dashboard's one way to the server: the generated contextd client over
// gRPC-Web (fetch, same origin, served by contextd's Connect/gRPC-Web
// endpoint), with the API key, if any, sent as a bearer token. Everything below turns the generated messages into
// the plain numbers and dates the views draw.
import { createClient, ConnectError, Code, type Interceptor, type Client } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { ago, comma, short } from "./dom.js";
import {
  ContextLevel,
  MessageKind,
  Role,
  MessageView,
  StatusEvent,
  type ContextUsage,
  type Session as PbSession,
  type Compaction as PbCompaction,
  type CompactionInfo,
  type ContextStatus,
  type Message as PbMessage,
  type Ledger,
} from "@contextd/gen/contextd/v1/types_pb.js";
import { ContextService } from "@contextd/gen/contextd/v1/context_service_pb.js";

const KEY = "contextd.apiKey";

export function apiKey(): string {
  return sessionStorage.getItem(KEY) ?? "";
}
export function setApiKey(k: string): void {
  if (k) sessionStorage.setItem(KEY, k);
  else sessionStorage.removeItem(KEY);
}

const auth: Interceptor = (next) => async (req) => {
  const k = apiKey();
  if (k) req.header.set("Authorization", `Bearer ${k}`);
  return next(req);
};

export const client: Client<typeof ContextService> = createClient(
  ContextService,
  // gRPC-Web: errors travel in trailers of an HTTP 200, so a refused key
  // or a missing session never shows up as a failed load in the console.
  createGrpcWebTransport({ baseUrl: location.origin, useBinaryFormat: true, interceptors: [auth] }),
);

export { ConnectError, Code, StatusEvent, MessageView };

export function isAuthError(e: unknown): boolean {
  const c = ConnectError.from(e).code;
  return c === Code.Unauthenticated || c === Code.PermissionDenied;
}
export function isAbort(e: unknown): boolean {
  return ConnectError.from(e).code === Code.Canceled;
}
export function errorText(e: unknown): string {
  const err = ConnectError.from(e);
  return `${Code[err.code] ?? err.code}: ${err.rawMessage}`;
}

export interface Usage {
  model: string;
  window: number;
  system: number;
  tools: number;
  messages: number;
  messageCount: number;
  reserved: number;
  used: number;
  free: number;
  over: number;
  percent: number;
  level: string;
  warning: number;
  critical: number;
  emergency: number;
  source: string;
}

const n = (v: bigint | number | undefined): number => Number(v ?? 0);
export const date = (t: Timestamp | undefined): Date | undefined => (t ? timestampDate(t) : undefined);

export function usage(u: ContextUsage | undefined): Usage {
  const th = u?.thresholds;
  return {
    model: u?.model ?? "",
    window: n(u?.contextWindow),
    system: n(u?.systemTokens),
    tools: n(u?.toolsTokens),
    messages: n(u?.messagesTokens),
    messageCount: n(u?.messageCount),
    reserved: n(u?.reservedOutputTokens),
    used: n(u?.usedTokens),
    free: n(u?.freeTokens),
    over: n(u?.overTokens),
    percent: u?.percentUsed ?? 0,
    level: ContextLevel[u?.level ?? 0] ?? "UNSPECIFIED",
    warning: th?.warningThreshold ?? 0,
    critical: th?.criticalThreshold ?? 0,
    emergency: th?.emergencyThreshold ?? 0,
    source: String(u?.estimateSource ?? ""),
  };
}

// Spend is what the session's ledger says so far (fed by ReportUsage):
// undefined when nothing was reported.
export interface Spend {
  usd: number;
  hitRate: number;
  calls: number;
}

export function spend(l: Ledger | undefined): Spend | undefined {
  const calls = n(l?.calls?.calls) + n(l?.compactionOverhead?.calls);
  if (!l || calls === 0) return undefined;
  return { usd: l.totalCostUsd, hitRate: l.cacheHitRate, calls };
}

export function spendText(sp: Spend | undefined): string {
  if (!sp) return "—";
  const usd = sp.usd >= 100 ? sp.usd.toFixed(0) : sp.usd >= 1 ? sp.usd.toFixed(2) : sp.usd.toFixed(4);
  return `$${usd} · ${(100 * sp.hitRate).toFixed(0)} % cached`;
}

export interface SessionRow {
  id: string;
  model: string;
  version: number;
  messageCount: number;
  usage: Usage;
  createdAt?: Date;
  updatedAt?: Date;
  labels: Record<string, string>;
  spend?: Spend;
  last?: LastCompaction;
  warnings: string[];
}

export function sessionRow(s: PbSession): SessionRow {
  return {
    id: s.id,
    model: s.model,
    version: n(s.version),
    messageCount: n(s.messageCount),
    usage: usage(s.usage),
    createdAt: date(s.createdAt),
    updatedAt: date(s.updatedAt),
    labels: { ...s.labels },
    spend: spend(s.ledger),
    last: lastCompaction(s.lastCompaction),
    warnings: [...s.warnings],
  };
}

export interface CompactionRow {
  id: string;
  round: number;
  tiers: string[];
  before: number;
  after: number;
  createdAt?: Date;
  revertedAt?: Date;
  reasons: string[];
  summary: string;
  items: number;
  // replaced maps each placeholder or summary this compaction made to the
  // ids it stands in for and why.
  replaced: Map<string, { ids: string[]; tier: string; reason: string }>;
}

export function compactionRow(c: PbCompaction): CompactionRow {
  return {
    id: c.id,
    round: c.round,
    tiers: [...c.tiers],
    before: n(c.tokensBefore),
    after: n(c.tokensAfter),
    createdAt: date(c.createdAt),
    revertedAt: date(c.revertedAt),
    reasons: [...new Set(c.items.map((i) => i.reason).filter(Boolean))],
    summary: c.summary,
    items: c.items.length,
    replaced: new Map(c.items.filter((i) => i.newMessageId).map((i) => [i.newMessageId, { ids: [...i.replacedMessageIds], tier: i.tier, reason: i.reason }])),
  };
}

export interface LastCompaction {
  round: number;
  tiers: string[];
  before: number;
  after: number;
  at?: Date;
  revertedAt?: Date;
}

export function lastCompaction(c: CompactionInfo | undefined): LastCompaction | undefined {
  if (!c || !c.id) return undefined;
  return { round: c.round, tiers: [...c.tiers], before: n(c.tokensBefore), after: n(c.tokensAfter), at: date(c.createdAt), revertedAt: date(c.revertedAt) };
}

// lastText is the Last compaction cell: round, tiers, savings and when.
export function lastText(c: LastCompaction | undefined): string {
  if (!c) return "—";
  const state = c.revertedAt ? ", reverted" : "";
  return `round ${c.round} · ${c.tiers.join("+")} · −${short(c.before - c.after)} tokens${state} · ${ago(c.at)}`;
}

// The one "% used": used tokens over the usable window (the window minus
// the reserved output), as the API's percent_used; of the whole window it
// is shown beside it, in a tooltip.
export function percentText(u: Usage): string {
  return `${u.percent.toFixed(1)} %`;
}
export function percentTitle(u: Usage): string {
  const whole = (100 * u.used) / Math.max(u.window, 1);
  return `${u.percent.toFixed(1)} % of the usable window (${comma(u.window - u.reserved)} tokens: the ${comma(u.window)}-token window minus ${comma(u.reserved)} reserved for the reply); ${whole.toFixed(1)} % of the whole window`;
}

// warningLabel turns a warning into a few words for a badge (the full text
// is its tooltip).
export function warningLabel(w: string): string {
  if (/unknown model|not in the registry/i.test(w)) return "unknown model";
  if (/paused/i.test(w)) return "auto-compaction paused";
  if (/fail/i.test(w)) return "compaction failed";
  if (/over|does not fit/i.test(w)) return "over the window";
  return "warning";
}

export interface StatusPoint {
  sessionId: string;
  version: number;
  event: number;
  usage: Usage;
  compacted: boolean;
  at: Date;
  last?: LastCompaction;
  spend?: Spend;
  warnings: string[];
}

export function statusPoint(st: ContextStatus): StatusPoint {
  return {
    sessionId: st.sessionId,
    version: n(st.version),
    event: st.event,
    usage: usage(st.usage),
    compacted: st.compacted,
    at: date(st.time) ?? new Date(),
    last: lastCompaction(st.lastCompaction),
    spend: spend(st.ledger),
    warnings: [...st.warnings, ...(st.usage?.warnings ?? [])],
  };
}

export interface MessageRow {
  id: string;
  position: number;
  role: string;
  kind: string;
  tokens: number;
  pinned: boolean;
  text: string;
}

export function messageRow(m: PbMessage): MessageRow {
  const text = m.parts
    .map((p) => {
      switch (p.kind.case) {
        case "text":
          return p.kind.value.text;
        case "toolCall":
          return `→ ${p.kind.value.name}(${p.kind.value.argumentsJson})`;
        case "toolResult":
          return (p.kind.value.isError ? "✗ " : "") + p.kind.value.content;
        case "image":
          return `[image ${p.kind.value.mediaType}]`;
        default:
          return "";
      }
    })
    .join("\n");
  return {
    id: m.id,
    position: n(m.position),
    role: (Role[m.role] ?? "").toLowerCase(),
    kind: MessageKind[m.kind] ?? "NORMAL",
    tokens: n(m.tokens),
    pinned: m.pinned,
    text,
  };
}

// watch follows a WatchContextStatus stream (one session, or the whole
// tenant when sessionId is empty) until signal aborts, reconnecting with
// backoff and resuming from the last version seen. Heartbeats are dropped.
export async function watch(
  sessionId: string,
  fromVersion: number,
  signal: AbortSignal,
  on: (p: StatusPoint) => void,
  conn: (state: "live" | "reconnecting" | "auth") => void,
): Promise<void> {
  let backoff = 500;
  let version = fromVersion;
  while (!signal.aborted) {
    try {
      const stream = client.watchContextStatus({ sessionId, fromVersion: BigInt(sessionId ? version : 0) }, { signal });
      for await (const res of stream) {
        backoff = 500;
        conn("live");
        const st = res.status;
        if (!st || st.event === StatusEvent.HEARTBEAT) continue;
        const p = statusPoint(st);
        if (sessionId) version = Math.max(version, p.version);
        on(p);
      }
    } catch (e) {
      if (signal.aborted || isAbort(e)) return;
      if (isAuthError(e)) {
        conn("auth");
        return;
      }
    }
    if (signal.aborted) return;
    conn("reconnecting");
    await new Promise((r) => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, 10_000);
  }
}
