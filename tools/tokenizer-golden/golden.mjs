// Writes the golden token counts of the open-weight tokenizer families into
// testdata/golden/openweights/ with the models' own tokenizer.json and chat
// templates (transformers.js, pinned in package-lock.json; the shared code is
// reference.mjs). The Go tests of internal/tokens assert zero mismatches
// against these files; CI re-runs this script and fails unless it reproduces
// them byte for byte.
//
//   npm ci && node golden.mjs
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { chatCounts, textCounts, tokenizers } from "./reference.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const golden = join(root, "testdata", "golden");
const out = join(golden, "openweights");

const only = process.argv.slice(2);
const toks = tokenizers(only);

const texts = readFileSync(join(golden, "token_counts.jsonl"), "utf8")
  .split("\n").filter((l) => l !== "").map((l) => JSON.parse(l).text);

// Text: one line per line of token_counts.jsonl.
const lines = texts.map((text, i) => JSON.stringify(textCounts({ line: i + 1 }, toks, text)));
if (only.length === 0) writeFileSync(join(out, "text_counts.jsonl"), lines.join("\n") + "\n");

// Chat: one line per request of chat_requests.jsonl.
const requests = readFileSync(join(out, "chat_requests.jsonl"), "utf8")
  .split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
const chatTokenizers = new Map(toks);
const chatLines = requests.map((req) => JSON.stringify(chatCounts({ name: req.name }, chatTokenizers, req)));
writeFileSync(join(out, "chat_counts.jsonl"), chatLines.join("\n") + "\n");
