// Node.js transports: gRPC over HTTP/2 and Connect over HTTP/1.1 or HTTP/2.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ContextService } from "./gen/contextd/v1/context_service_pb.js";
import type { ContextdClient } from "./client.js";
import { interceptorsOf, timeoutOf, type ClientOptions } from "./transport.js";

export type { ClientOptions } from "./transport.js";

/** Node client options: the protocol, and the HTTP version for Connect. */
export interface NodeClientOptions extends ClientOptions {
  /** "grpc" (default, HTTP/2) or "connect" (HTTP/JSON-capable, HTTP/1.1 or HTTP/2). */
  protocol?: "grpc" | "connect";
  /** For "connect": "1.1" (default) or "2". gRPC always uses HTTP/2. */
  httpVersion?: "1.1" | "2";
  /** Send Connect requests as JSON instead of binary protobuf (for debugging). */
  useJson?: boolean;
}

/** A ContextService client for Node.js. */
export function createContextdClient(opts: NodeClientOptions): ContextdClient {
  const common = {
    baseUrl: opts.baseUrl,
    interceptors: interceptorsOf(opts),
    defaultTimeoutMs: timeoutOf(opts),
  };
  const protocol = opts.protocol ?? "grpc";
  switch (protocol) {
    case "grpc":
      return createClient(ContextService, createGrpcTransport(common));
    case "connect":
      return createClient(
        ContextService,
        createConnectTransport({ ...common, httpVersion: opts.httpVersion ?? "1.1", useBinaryFormat: !opts.useJson }),
      );
    default:
      throw new Error(`createContextdClient: unknown protocol ${JSON.stringify(protocol)} (want "grpc" or "connect")`);
  }
}
