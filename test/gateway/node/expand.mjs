// Drives contextd's contextd_expand loop through the gateway with the
// official npm SDKs, as an agent that knows nothing of contextd does: a tool
// call whose output is big, then (through contextd's own HTTP/JSON API, as an
// operator would) the session's expose_expand_tool turned on and the output
// pruned, then a question the model answers by reading the output back.
// Usage: node expand.mjs HOST:PORT BIG_FILE. Prints one JSON line per run:
// {"api", "stream", "question", "session", "answer", "callId", "rounds", "rawBytes", "leaked", "next": {history, session, answer}}.
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { readChatStream } from "./chatstream.mjs";

const [addr, bigFile] = process.argv.slice(2);
const big = readFileSync(bigFile, "utf8");
const openai = new OpenAI({ baseURL: `http://${addr}/v1`, apiKey: "sk-test", maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: `http://${addr}`, apiKey: "sk-ant-test", maxRetries: 0 });
const lsTool = { name: "ls", description: "list a directory", parameters: { type: "object", properties: { path: { type: "string" } } } };

async function rpc(method, body) {
  const r = await fetch(`http://${addr}/contextd.v1.ContextService/${method}`, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method}: ${r.status} ${text}`);
  return JSON.parse(text);
}

// Each agent keeps its conversation; ask() sends it and appends the answer,
// returning {text, callId, headers, raw} (raw: everything the SDK handed
// over, bodies or events, to look for the tool's name in).
function chatAgent(question, stream) {
  const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: question }];
  const tools = [{ type: "function", function: lsTool }];
  return {
    async ask() {
      const params = { model: "gpt-4o", messages, tools, ...(stream ? { stream: true } : {}) };
      const { data, response } = await openai.chat.completions.create(params).withResponse();
      let msg, raw;
      if (!stream) {
        msg = data.choices[0].message;
        raw = JSON.stringify(data);
      } else {
        const chunks = [];
        msg = await readChatStream(data, (chunk) => chunks.push(chunk));
        raw = JSON.stringify(chunks);
      }
      messages.push(msg);
      return { text: msg.content ?? "", callId: msg.tool_calls?.[0]?.id ?? "", headers: response.headers, raw };
    },
    result(id, content) { messages.push({ role: "tool", tool_call_id: id, content }); },
    user(text) { messages.push({ role: "user", content: text }); },
  };
}

function responsesAgent(question, stream) {
  const input = [{ role: "user", content: question }];
  const tools = [{ type: "function", ...lsTool }];
  return {
    async ask() {
      const params = { model: "gpt-4o", instructions: "You are terse.", input, tools, store: false, ...(stream ? { stream: true } : {}) };
      const { data, response } = await openai.responses.create(params).withResponse();
      let final, raw;
      if (!stream) {
        final = data;
        raw = JSON.stringify(data);
      } else {
        const events = [];
        for await (const ev of data) {
          events.push(ev);
          if (ev.type === "response.completed") final = ev.response;
        }
        raw = JSON.stringify(events);
      }
      input.push(...final.output);
      const call = final.output.find((o) => o.type === "function_call");
      const text = final.output.filter((o) => o.type === "message").flatMap((o) => o.content).map((c) => c.text ?? "").join("");
      return { text, callId: call?.call_id ?? "", headers: response.headers, raw };
    },
    result(id, content) { input.push({ type: "function_call_output", call_id: id, output: content }); },
    user(text) { input.push({ role: "user", content: text }); },
  };
}

function messagesAgent(question, stream) {
  const msgs = [{ role: "user", content: question }];
  const tools = [{ name: "ls", description: "list a directory", input_schema: lsTool.parameters }];
  return {
    async ask() {
      const params = { model: "claude-sonnet-4-5", max_tokens: 1024, system: "You are terse.", messages: msgs, tools };
      let final, response, raw;
      if (!stream) {
        ({ data: final, response } = await anthropic.messages.create(params).withResponse());
        raw = JSON.stringify(final);
      } else {
        const s = anthropic.messages.stream(params);
        const events = [];
        s.on("streamEvent", (ev) => events.push(ev));
        ({ response } = await s.withResponse());
        final = await s.finalMessage();
        raw = JSON.stringify(events);
      }
      msgs.push({ role: "assistant", content: final.content });
      const use = final.content.find((b) => b.type === "tool_use");
      const text = final.content.filter((b) => b.type === "text").map((b) => b.text).join("");
      return { text, callId: use?.id ?? "", headers: response.headers, raw };
    },
    result(id, content) { msgs.push({ role: "user", content: [{ type: "tool_result", tool_use_id: id, content }] }); },
    user(text) { msgs.push({ role: "user", content: text }); },
  };
}

async function run(api, make, stream) {
  // Each run its own question, so that each is a session of its own.
  const question = `What is in src? (${api}${stream ? ", streamed" : ""})`;
  const a = make(question, stream);
  const first = await a.ask();
  if (!first.callId) throw new Error(`${api}: no tool call in the first answer: ${first.raw}`);
  a.result(first.callId, big);
  await a.ask();
  const session = first.headers.get("x-contextd-session");
  // The operator's side, through contextd's HTTP/JSON API.
  await rpc("UpdateSession", { sessionId: session, updateMask: "policy", policy: { exposeExpandTool: true, protectRecentToolResults: 0 } });
  const c = await rpc("Compact", { sessionId: session, tier: "COMPACTION_TIER_PRUNE", target: 0.01 });
  if (!c.compacted) throw new Error(`${api}: the prune compacted nothing`);
  a.user("Show me that listing again.");
  const got = await a.ask();
  a.user("Thanks.");
  const next = await a.ask();
  return {
    api, stream, question, session, answer: got.text, callId: got.callId,
    rounds: got.headers.get("x-contextd-expand-rounds"),
    rawBytes: got.raw.length,
    leaked: got.raw.includes("contextd_expand") || [...got.headers].some(([k, v]) => `${k}: ${v}`.includes("contextd_expand")),
    next: { history: next.headers.get("x-contextd-history"), session: next.headers.get("x-contextd-session"), answer: next.text },
  };
}

for (const [api, make] of [["chat", chatAgent], ["responses", responsesAgent], ["messages", messagesAgent]]) {
  for (const stream of [false, true]) {
    console.log(JSON.stringify(await run(api, make, stream)));
  }
}
