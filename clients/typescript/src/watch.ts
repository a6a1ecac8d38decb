import { Code, ConnectError } from "@connectrpc/connect";
import type { ContextdClient } from "./client.js";
import { StatusEvent, type ContextStatus } from "./gen/contextd/v1/types_pb.js";

/** What to watch and how to resume. */
export interface WatchOptions {
  /** The session to watch; omit to watch every session of the tenant. */
  sessionId?: string;
  /** The last version already seen (one-session watch): nothing at or below it is yielded. */
  fromVersion?: bigint;
  /** Seconds between server heartbeats when nothing changes (1–300; server default 15). */
  heartbeatSeconds?: number;
  /** Yield heartbeats too (event STATUS_EVENT_HEARTBEAT); by default they are consumed silently. */
  heartbeats?: boolean;
  /**
   * Reconnects in a row without a message before giving up with the last
   * error (default 10; 0 never resumes). Only UNAVAILABLE is retried: it is
   * what a replica that shuts down sends.
   */
  maxRetries?: number;
  /** First reconnect delay, doubled per failure up to maxBackoffMs (defaults 100 and 5,000). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Ends the watch: the iterator then returns instead of throwing. */
  signal?: AbortSignal;
}

/**
 * watchStatus yields the context status of one session (or of every session
 * of the tenant) as it changes: a snapshot first, then one status per change.
 * When the server goes away (UNAVAILABLE, e.g. a rolling restart) it watches
 * again from the last version it yielded, so no change is yielded twice and a
 * session's versions never go backwards. It returns when the watched session
 * is deleted (after yielding the deletion), when the server ends the stream,
 * or when `signal` aborts. Memory: the last version of each session seen.
 */
export async function* watchStatus(client: ContextdClient, opts: WatchOptions = {}): AsyncGenerator<ContextStatus, void, undefined> {
  const maxRetries = opts.maxRetries ?? 10;
  const minBackoff = opts.minBackoffMs ?? 100;
  const maxBackoff = opts.maxBackoffMs ?? 5_000;
  const seen = new Map<string, bigint>();
  if (opts.sessionId && opts.fromVersion !== undefined) seen.set(opts.sessionId, opts.fromVersion);
  let failures = 0;
  for (;;) {
    const request = {
      sessionId: opts.sessionId ?? "",
      fromVersion: opts.sessionId ? (seen.get(opts.sessionId) ?? 0n) : 0n,
      heartbeatSeconds: opts.heartbeatSeconds ?? 0,
    };
    let err: ConnectError;
    try {
      // No deadline: a watch lasts as long as the caller wants it.
      for await (const res of client.watchContextStatus(request, { signal: opts.signal, timeoutMs: 0 })) {
        failures = 0;
        const st = res.status;
        if (!st) continue;
        if (st.event === StatusEvent.HEARTBEAT) {
          if (opts.heartbeats) yield st;
          continue;
        }
        const last = seen.get(st.sessionId);
        if (st.event !== StatusEvent.DELETED && last !== undefined && st.version <= last) continue;
        seen.set(st.sessionId, st.version);
        yield st;
      }
      return;
    } catch (e) {
      if (opts.signal?.aborted) return;
      err = ConnectError.from(e);
      if (err.code !== Code.Unavailable || failures >= maxRetries) throw err;
    }
    const delay = Math.min(maxBackoff, minBackoff * 2 ** failures);
    failures++;
    if (!(await sleep(delay, opts.signal))) return;
  }
}

// sleep waits ms milliseconds; false when signal aborted first.
function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve(!signal?.aborted);
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
