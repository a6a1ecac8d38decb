// Counts what internal/tokens' differential test generates, with the same
// reference as golden.mjs (reference.mjs). Reads JSON lines from stdin, each
// either {"text": "..."} or a chat request in chat_requests.jsonl's neutral
// form, and writes one JSON line per input, in order: {"llama3": n, ...}
// (each family's count of the text) or {"qwen3": n, ...} (each template's
// count of the request; null where the template raises).
//
//   node count.mjs < inputs.jsonl
import { createInterface } from "node:readline";
import { chatCounts, textCounts, tokenizers } from "./reference.mjs";

const toks = tokenizers();
const chatTokenizers = new Map(toks);
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === "") continue;
  const input = JSON.parse(line);
  const row = typeof input.text === "string" ? textCounts({}, toks, input.text) : chatCounts({}, chatTokenizers, input);
  process.stdout.write(JSON.stringify(row) + "\n");
}
