import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ContextdClient } from "./client.js";
import type { PrepareContextResponse } from "./gen/contextd/v1/context_service_pb.js";
import { MessageSchema, type ContextStatus, type ContextUsage, type Message } from "./gen/contextd/v1/types_pb.js";

/** A message to append, as a plain object: `{ role: Role.USER, parts: [...] }`. */
export type MessageInit = MessageInitShape<typeof MessageSchema>;

/** The usage block of the provider's response (numbers or bigints). */
export interface ProviderUsage {
  /** Anthropic usage.input_tokens; OpenAI usage.prompt_tokens. */
  inputTokens: number | bigint;
  /** Anthropic usage.cache_read_input_tokens (OpenAI: leave 0). */
  cacheReadInputTokens?: number | bigint;
  /** Anthropic usage.cache_creation_input_tokens (OpenAI: leave 0). */
  cacheCreationInputTokens?: number | bigint;
  outputTokens?: number | bigint;
}

/** What the model call returns to the loop. */
export interface ModelTurn<T> {
  /** What the provider billed for this call; omit when it reported nothing. */
  usage?: ProviderUsage;
  /** Messages to append before the next call: the model's reply, tool results, a new user turn. */
  append?: MessageInit[];
  /** Anything the caller wants back from step(). */
  output: T;
}

/** Calls the model with exactly the messages contextd returned. */
export type ModelCall<T> = (messages: Message[], status: ContextStatus) => Promise<ModelTurn<T>> | ModelTurn<T>;

/** One step of the loop. */
export interface StepResult<T> {
  /** What PrepareContext returned (the messages sent, the status, whether it compacted). */
  prepared: PrepareContextResponse;
  /** Usage after the report (undefined when the model call reported none). */
  usage?: ContextUsage;
  output: T;
}

/**
 * AgentLoop is the loop every agent runs around contextd: PrepareContext with
 * what happened since the last model call, call the model with the messages
 * it returns, ReportUsage with what the provider billed. Queued messages go
 * out with an idempotency key that is kept until PrepareContext succeeds, so a
 * step() that failed on the network can simply be called again without
 * appending anything twice.
 */
export class AgentLoop {
  private pending: MessageInit[] = [];
  private pendingKey: string | undefined;

  constructor(
    private readonly client: ContextdClient,
    readonly sessionId: string,
  ) {}

  /** Queues messages for the next step (a user turn, tool results). */
  add(...messages: MessageInit[]): void {
    this.pending.push(...messages);
    this.pendingKey = undefined; // a different batch needs a new key
  }

  /** Messages queued for the next step. */
  get queued(): readonly MessageInit[] {
    return this.pending;
  }

  /** prepare → call the model → report usage; queues the turn's `append` for the next step. */
  async step<T>(callModel: ModelCall<T>, signal?: AbortSignal): Promise<StepResult<T>> {
    if (this.pending.length > 0) this.pendingKey ??= crypto.randomUUID();
    const prepared = await this.client.prepareContext(
      { sessionId: this.sessionId, messages: this.pending, idempotencyKey: this.pendingKey ?? "" },
      { signal },
    );
    this.pending = [];
    this.pendingKey = undefined;
    if (!prepared.status) throw new Error("PrepareContext returned no status");
    const turn = await callModel(prepared.messages, prepared.status);
    let usage: ContextUsage | undefined;
    if (turn.usage) {
      const u = turn.usage;
      const res = await this.client.reportUsage(
        {
          sessionId: this.sessionId,
          inputTokens: BigInt(u.inputTokens),
          cacheReadInputTokens: BigInt(u.cacheReadInputTokens ?? 0),
          cacheCreationInputTokens: BigInt(u.cacheCreationInputTokens ?? 0),
          outputTokens: BigInt(u.outputTokens ?? 0),
          // The view token names the view that was sent, even if the session
          // is compacted before this report arrives.
          request: prepared.viewToken
            ? { case: "viewToken", value: prepared.viewToken }
            : { case: "messageCount", value: BigInt(prepared.messages.length) },
        },
        { signal },
      );
      usage = res.usage;
    }
    if (turn.append?.length) this.add(...turn.append);
    return { prepared, usage, output: turn.output };
  }

  /** Appends whatever is still queued (the last turn's reply) without preparing a model call. */
  async flush(signal?: AbortSignal): Promise<void> {
    if (this.pending.length === 0) return;
    this.pendingKey ??= crypto.randomUUID();
    await this.client.appendMessages(
      { sessionId: this.sessionId, messages: this.pending, idempotencyKey: this.pendingKey },
      { signal },
    );
    this.pending = [];
    this.pendingKey = undefined;
  }
}
