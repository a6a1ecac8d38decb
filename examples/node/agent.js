// An agent loop around contextd, in plain Node.js with @grpc/grpc-js.
//
// Before every model call the agent sends what happened since the last one
// (PrepareContext) and gets back the messages to send, compacted when the
// session's policy says so. After the call it reports what the provider billed
// (ReportUsage), so contextd's figures match the bill. A WatchContextStatus
// stream prints the context status as it changes, as a dashboard would.
//
// The model here is a scripted stand-in so the example runs anywhere; replace
// callModel with your provider's SDK.
//
//   npm ci && node agent.js [HOST:PORT] [STEPS]
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const addr = process.argv[2] || 'localhost:50051';
const steps = Number(process.argv[3] || 40);

// The descriptor set that `make generate` builds with buf: no .proto files,
// no code generation step.
const descriptor = fs.readFileSync(path.join(__dirname, '..', '..', 'internal', 'api', 'contextd.binpb'));
const def = protoLoader.loadFileDescriptorSetFromBuffer(descriptor, { longs: Number, enums: String, defaults: true, oneofs: true });
const { ContextService } = grpc.loadPackageDefinition(def).contextd.v1;
const client = new ContextService(addr, grpc.credentials.createInsecure());
const call = (method, req) => new Promise((resolve, reject) =>
  client[method](req, { deadline: Date.now() + 30_000 }, (err, res) => (err ? reject(err) : resolve(res))));

// A stand-in for an LLM: it inspects files for a while, then answers.
function callModel(messages, step) {
  const last = messages[messages.length - 1];
  const localTokens = messages.reduce((n, m) => n + Number(m.tokens), 0);
  const usage = { input_tokens: Math.round(localTokens * 1.0) + 40, output_tokens: 60 }; // what the provider would bill
  if (step >= steps - 1) {
    return { message: { role: 'ROLE_ASSISTANT', parts: [{ text: { text: 'All tests pass now. The bug was an off-by-one in src/parser.js.' } }] }, usage };
  }
  const id = `call_${step}`;
  return {
    message: {
      role: 'ROLE_ASSISTANT',
      parts: [
        { text: { text: `Step ${step}: I'll look at the next file.` } },
        { tool_call: { id, name: 'bash', arguments_json: JSON.stringify({ command: `cat src/module_${step}.js` }) } },
      ],
    },
    usage,
    lastSeen: last && last.id,
  };
}

// A stand-in for running a tool.
function runTool(toolCall, step) {
  const lines = Array.from({ length: 40 }, (_, i) => `module_${step}.js:${i + 1}: export function f${i}(x) { return x + ${i}; }`);
  return { role: 'ROLE_TOOL', parts: [{ tool_result: { tool_call_id: toolCall.id, content: lines.join('\n') } }] };
}

async function main() {
  const sessionId = `agent-${process.pid}`;
  await call('CreateSession', {
    id: sessionId,
    model: 'gpt-4', // an 8k window, so compaction shows up quickly
    system_prompt: 'You are a coding agent. Use the bash tool to inspect files.',
    tools: [{ name: 'bash', description: 'Run a shell command.', parameters_json: JSON.stringify({ type: 'object', properties: { command: { type: 'string' } } }) }],
    policy: { warning_threshold: 0.65, critical_threshold: 0.65 }, // "summarize at 65 %"
  });

  // Watch the status like a dashboard would.
  let compactions = 0;
  const watch = client.WatchContextStatus({ session_id: sessionId });
  watch.on('data', ({ status }) => {
    if (status.event === 'STATUS_EVENT_HEARTBEAT') return;
    const u = status.usage;
    console.log(`[watch] v${status.version} ${status.event.replace('STATUS_EVENT_', '').toLowerCase()}: ` +
      `${u.used_tokens}/${u.context_window - u.reserved_output_tokens} tokens (${u.percent_used.toFixed(0)}%, ${u.estimate_source.replace('ESTIMATE_SOURCE_', '').toLowerCase()})`);
  });
  watch.on('error', (err) => { if (err.code !== grpc.status.CANCELLED) console.error('[watch]', err.message); });

  let pending = [{ role: 'ROLE_USER', parts: [{ text: { text: 'The tests in src/ fail. Find the bug and fix it.' } }] }];
  for (let step = 0; step < steps; step++) {
    // 1. Before the model call: append what happened, get what to send.
    const prep = await call('PrepareContext', { session_id: sessionId, messages: pending });
    if (prep.status.compacted) {
      compactions++;
      const c = prep.status.last_compaction;
      console.log(`step ${step}: compacted (${c.tiers.join(' + ')}): ${c.tokens_before} -> ${c.tokens_after} tokens`);
    }
    for (const w of prep.status.warnings) console.log(`step ${step}: warning: ${w}`);

    // 2. The model call, with exactly the messages contextd returned.
    const { message, usage } = callModel(prep.messages, step);

    // 3. After the call: what the provider billed for that request.
    await call('ReportUsage', { session_id: sessionId, input_tokens: usage.input_tokens, output_tokens: usage.output_tokens,
      message_count: prep.messages.length });

    // 4. Run the tools; their results go out with the next PrepareContext.
    pending = [message];
    for (const part of message.parts) {
      if (part.tool_call) pending.push(runTool(part.tool_call, step));
    }
  }
  await call('AppendMessages', { session_id: sessionId, messages: pending });
  const final = await call('GetContextUsage', { session_id: sessionId });
  const list = await call('ListCompactions', { session_id: sessionId });
  console.log(`done: ${steps} model calls, ${list.compactions.length} compactions, ` +
    `${final.usage.used_tokens} tokens in the window (${final.usage.estimate_source.replace('ESTIMATE_SOURCE_', '').toLowerCase()})`);
  watch.cancel();
  client.close();
  if (compactions === 0 || list.compactions.length !== compactions) {
    console.error('FAIL: expected automatic compactions');
    process.exit(1);
  }
}

main().catch((err) => { console.error('FAIL:', err.message); process.exit(1); });
