// Browser transports (fetch): Connect and gRPC-Web. They also run in Node
// 20+, which has fetch, and that is how the tests exercise them.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { ContextService } from "./gen/contextd/v1/context_service_pb.js";
import type { ContextdClient } from "./client.js";
import { interceptorsOf, timeoutOf, type ClientOptions } from "./transport.js";

export type { ClientOptions } from "./transport.js";

/** Browser client options. */
export interface WebClientOptions extends ClientOptions {
  /** "connect" (default) or "grpc-web". */
  protocol?: "connect" | "grpc-web";
  /** Send Connect requests as JSON instead of binary protobuf (for debugging). */
  useJson?: boolean;
}

/** A ContextService client for browsers (and any runtime with fetch). */
export function createContextdClient(opts: WebClientOptions): ContextdClient {
  const common = {
    baseUrl: opts.baseUrl,
    interceptors: interceptorsOf(opts),
    defaultTimeoutMs: timeoutOf(opts),
  };
  const protocol = opts.protocol ?? "connect";
  switch (protocol) {
    case "connect":
      return createClient(ContextService, createConnectTransport({ ...common, useBinaryFormat: !opts.useJson }));
    case "grpc-web":
      return createClient(ContextService, createGrpcWebTransport({ ...common, useBinaryFormat: true }));
    default:
      throw new Error(`createContextdClient: unknown protocol ${JSON.stringify(protocol)} (want "connect" or "grpc-web")`);
  }
}
