import type { Interceptor } from "@connectrpc/connect";

/**
 * An interceptor that sends `authorization: Bearer <token>` with every call,
 * the header contextd maps to a tenant on every protocol. The token may be a
 * function, called per request, for keys that rotate.
 */
export function bearerAuth(token: string | (() => string)): Interceptor {
  if (typeof token === "string" && token === "") {
    throw new Error("bearerAuth: empty token");
  }
  return (next) => (req) => {
    const value = typeof token === "function" ? token() : token;
    req.header.set("authorization", `Bearer ${value}`);
    return next(req);
  };
}
