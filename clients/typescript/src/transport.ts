import type { Interceptor } from "@connectrpc/connect";
import { bearerAuth } from "./auth.js";

/** Options shared by the Node and browser client constructors. */
export interface ClientOptions {
  /** Where contextd listens, e.g. "http://localhost:50051" (h2c) or "https://contextd.example". */
  baseUrl: string;
  /** API key sent as `authorization: Bearer <token>`; omit when auth is off. */
  token?: string | (() => string);
  /** More interceptors, run after the auth one. */
  interceptors?: Interceptor[];
  /** Deadline of every call unless the call sets its own (default 30 s; 0 for none). */
  defaultTimeoutMs?: number;
}

export function interceptorsOf(opts: ClientOptions): Interceptor[] {
  const list = opts.token !== undefined ? [bearerAuth(opts.token)] : [];
  return [...list, ...(opts.interceptors ?? [])];
}

export function timeoutOf(opts: ClientOptions): number | undefined {
  const ms = opts.defaultTimeoutMs ?? 30_000;
  return ms > 0 ? ms : undefined;
}
