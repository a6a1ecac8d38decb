// readChatStream folds a Chat Completions stream from the npm openai SDK
// into the assistant message it carries (text and tool calls), as an agent
// does; onChunk, when given, sees every chunk first.
export async function readChatStream(data, onChunk) {
  const msg = { role: "assistant", content: "", tool_calls: [] };
  for await (const chunk of data) {
    onChunk?.(chunk);
    const d = chunk.choices[0]?.delta ?? {};
    msg.content += d.content ?? "";
    for (const tc of d.tool_calls ?? []) {
      msg.tool_calls[tc.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
      const c = msg.tool_calls[tc.index];
      if (tc.id) c.id = tc.id;
      c.function.name += tc.function?.name ?? "";
      c.function.arguments += tc.function?.arguments ?? "";
    }
  }
  if (msg.tool_calls.length === 0) delete msg.tool_calls;
  if (msg.tool_calls && msg.content === "") msg.content = null;
  return msg;
}
