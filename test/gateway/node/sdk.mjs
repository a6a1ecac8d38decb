// Drives contextd's gateway with the official npm SDKs, as an agent does:
// a tool call, its result, and the final answer, through each API, streamed
// and not. Usage: node sdk.mjs HOST:PORT. Prints one JSON line per run:
// {"api", "stream", "sessions": [...], "answer"}.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { readChatStream } from "./chatstream.mjs";

const addr = process.argv[2];
const openai = new OpenAI({ baseURL: `http://${addr}/v1`, apiKey: "sk-test", maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: `http://${addr}`, apiKey: "sk-ant-test", maxRetries: 0 });

const question = (stream) => `What is in src?${stream ? " (streamed)" : ""}`;
const lsTool = { name: "ls", description: "list a directory", parameters: { type: "object", properties: { path: { type: "string" } } } };

async function chat(stream) {
  const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: question(stream) }];
  const tools = [{ type: "function", function: lsTool }];
  const sessions = [];
  async function ask() {
    if (!stream) {
      const { data, response } = await openai.chat.completions.create({ model: "gpt-4o", messages, tools }).withResponse();
      sessions.push(response.headers.get("x-contextd-session"));
      return data.choices[0].message;
    }
    const { data, response } = await openai.chat.completions.create({ model: "gpt-4o", messages, tools, stream: true }).withResponse();
    const msg = await readChatStream(data, (chunk) => {
      if (chunk.choices.length === 0) throw new Error("got a usage chunk it did not ask for");
    });
    sessions.push(response.headers.get("x-contextd-session"));
    return msg;
  }
  let m = await ask();
  const call = m.tool_calls[0];
  messages.push(m, { role: "tool", tool_call_id: call.id, content: "main.go" });
  m = await ask();
  return { api: "chat", stream, sessions, answer: m.content };
}

async function responses(stream) {
  const input = [{ role: "user", content: question(stream) }];
  const tools = [{ type: "function", ...lsTool }];
  const sessions = [];
  async function ask() {
    if (!stream) {
      const { data, response } = await openai.responses.create({ model: "gpt-4o", instructions: "You are terse.", input, tools, store: false }).withResponse();
      sessions.push(response.headers.get("x-contextd-session"));
      return data;
    }
    const { data, response } = await openai.responses.create({ model: "gpt-4o", instructions: "You are terse.", input, tools, store: false, stream: true }).withResponse();
    let final;
    for await (const ev of data) {
      if (ev.type === "response.completed") final = ev.response;
    }
    sessions.push(response.headers.get("x-contextd-session"));
    return final;
  }
  let r = await ask();
  const call = r.output.find((o) => o.type === "function_call");
  input.push(...r.output, { type: "function_call_output", call_id: call.call_id, output: "main.go" });
  r = await ask();
  return { api: "responses", stream, sessions, answer: r.output_text ?? r.output.find((o) => o.type === "message")?.content[0].text };
}

async function messages(stream) {
  const msgs = [{ role: "user", content: question(stream) }];
  const tools = [{ name: "ls", description: "list a directory", input_schema: lsTool.parameters }];
  const sessions = [];
  async function ask() {
    const params = { model: "claude-sonnet-4-5", max_tokens: 1024, system: "You are terse.", messages: msgs, tools };
    if (!stream) {
      const { data, response } = await anthropic.messages.create(params).withResponse();
      sessions.push(response.headers.get("x-contextd-session"));
      return data;
    }
    const s = anthropic.messages.stream(params);
    const { response } = await s.withResponse();
    const final = await s.finalMessage();
    sessions.push(response.headers.get("x-contextd-session"));
    return final;
  }
  let m = await ask();
  const use = m.content.find((b) => b.type === "tool_use");
  msgs.push({ role: "assistant", content: m.content }, { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "main.go" }] });
  m = await ask();
  return { api: "messages", stream, sessions, answer: m.content.find((b) => b.type === "text").text };
}

const only = process.argv[3];
for (const run of [chat, responses, messages]) {
  if (only && run.name !== only) continue;
  for (const stream of [false, true]) {
    console.log(JSON.stringify(await run(stream)));
  }
}
