// An agent loop on the unmodified npm openai SDK: Chat Completions with two
// tools it runs itself (a shell command, a file read), until the model
// answers with text. One turn per run; the conversation is kept in a state
// file so that the next run continues it.
//
//   node agent.mjs BASE_URL MODEL STATE_FILE PROMPT
import OpenAI from "openai";
import { execSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const [baseURL, model, stateFile, prompt] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "sk-fake-key", maxRetries: 0 });
const tools = [
  { type: "function", function: { name: "shell", description: "Run a bash command in the working directory and return its output.",
    parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } } },
  { type: "function", function: { name: "read_file", description: "Read a file.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] } } },
];
const messages = existsSync(stateFile)
  ? JSON.parse(readFileSync(stateFile, "utf8"))
  : [{ role: "system", content: "You are a careful assistant that checks a directory with the tools you have." }];
messages.push({ role: "user", content: prompt });
for (let i = 0; i < 200; i++) {
  const res = await client.chat.completions.create({ model, messages, tools });
  const msg = res.choices[0].message;
  messages.push(msg);
  if (!msg.tool_calls?.length) {
    writeFileSync(stateFile, JSON.stringify(messages));
    console.log(JSON.stringify({ answer: msg.content }));
    process.exit(0);
  }
  for (const call of msg.tool_calls) {
    const args = JSON.parse(call.function.arguments);
    let out;
    try {
      out = call.function.name === "shell"
        ? execSync(args.command, { shell: "/bin/bash", encoding: "utf8" })
        : readFileSync(args.path, "utf8");
    } catch (e) {
      out = String(e);
    }
    messages.push({ role: "tool", tool_call_id: call.id, content: out });
  }
}
throw new Error("no answer after 200 rounds");
