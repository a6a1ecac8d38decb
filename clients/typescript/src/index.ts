// @contextd/client: the generated contextd.v1 messages and ContextService
// descriptor (protobuf-es v2), plus the few helpers that pay for themselves:
// bearer-token auth, a resuming typed status watch, and the agent loop
// (prepare → call the model → report usage), and the contextd_expand tool's
// answers (expand.ts). Transports live in
// "@contextd/client/node" (gRPC, Connect) and "@contextd/client/web"
// (Connect, gRPC-Web), so a browser bundle never pulls in node:http2.
export * from "./gen/contextd/v1/types_pb.js";
export * from "./gen/contextd/v1/context_service_pb.js";
export { bearerAuth } from "./auth.js";
export { watchStatus, type WatchOptions } from "./watch.js";
export { AgentLoop, type MessageInit, type ModelCall, type ModelTurn, type ProviderUsage, type StepResult } from "./agent.js";
export { EXPAND_TOOL_NAME, answerExpandCall, expandOffered, modelTools, type ExpandAnswer, type ToolCallInit } from "./expand.js";
export type { ContextdClient } from "./client.js";
