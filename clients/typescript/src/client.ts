import type { Client } from "@connectrpc/connect";
import type { ContextService } from "./gen/contextd/v1/context_service_pb.js";

/** A typed client of contextd.v1.ContextService on any transport. */
export type ContextdClient = Client<typeof ContextService>;
