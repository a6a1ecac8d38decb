import type { ContextdClient } from "./client.js";
import type { PrepareContextResponse } from "./gen/contextd/v1/context_service_pb.js";
import { Role, type ToolDefinition } from "./gen/contextd/v1/types_pb.js";
import type { MessageInit } from "./agent.js";

/** The name of contextd's tool (the policy's `expose_expand_tool`). */
export const EXPAND_TOOL_NAME = "contextd_expand";

/** The tools to send to the model: the session's own, then those PrepareContext added. */
export function modelTools(sessionTools: readonly ToolDefinition[], prepared: PrepareContextResponse): ToolDefinition[] {
  return [...sessionTools, ...prepared.tools];
}

/** A tool call as the model made it. */
export interface ToolCallInit {
  id: string;
  name: string;
  argumentsJson: string;
}

/** The answer to one contextd_expand call. */
export interface ExpandAnswer {
  /** The tool result to append for the model. */
  message: MessageInit;
  /** The round limit was hit: the result tells the model to answer with what it has; offer no further round. */
  stop: boolean;
}

/** Whether `prepared` offers contextd's tool: PrepareContext returns it only while the policy exposes it. */
export function expandOffered(prepared: PrepareContextResponse): boolean {
  return prepared.tools.some((t) => t.name === EXPAND_TOOL_NAME);
}

/**
 * Answers `call` with the ExpandToolCall RPC when it is a call of contextd's
 * tool: named contextd_expand while `prepared` (the PrepareContext response
 * whose tools the model was sent) offers it. Undefined otherwise: the call is
 * the caller's, a client tool's (one may be named contextd_expand while the
 * option is off) or one of a tool the model was not offered. `round` is 1 for
 * the first expand round of one model turn (every expand call of one model
 * response is one round), 2 for the next. A call the model got wrong is
 * answered as an error result; a rejected promise is the RPC's.
 */
export async function answerExpandCall(
  client: ContextdClient,
  sessionId: string,
  prepared: PrepareContextResponse,
  call: ToolCallInit,
  round: number,
  signal?: AbortSignal,
): Promise<ExpandAnswer | undefined> {
  if (call.name !== EXPAND_TOOL_NAME || !expandOffered(prepared)) return undefined;
  const res = await client.expandToolCall({ sessionId, arguments: call.argumentsJson, round }, { signal });
  return {
    message: {
      role: Role.TOOL,
      parts: [{ kind: { case: "toolResult", value: { toolCallId: call.id, content: res.content, isError: res.isError } } }],
    },
    stop: res.stop,
  };
}
