// An agent loop around contextd with @contextd/client (clients/typescript).
//
// Before every model call the agent sends what happened since the last one
// (PrepareContext) and gets back the messages to send, compacted when the
// session's policy says so. After the call it reports what the provider billed
// (ReportUsage), so contextd's figures match the bill. AgentLoop does those
// three steps; watchStatus prints the context status as it changes, as a
// dashboard would.
//
// The model here is a scripted stand-in so the example runs anywhere; replace
// callModel with your provider's SDK.
//
//   npm ci && node agent.js [HOST:PORT] [STEPS] [grpc|connect]
//   (CONTEXTD_API_KEY=<key> when the server has API keys)
import { AgentLoop, ContextLevel, EstimateSource, Role, StatusEvent, watchStatus } from '@contextd/client';
import { createContextdClient } from '@contextd/client/node';

const addr = process.argv[2] || 'localhost:50051';
const steps = Number(process.argv[3] || 40);
const protocol = process.argv[4] || 'grpc';
const client = createContextdClient({ baseUrl: `http://${addr}`, protocol, token: process.env.CONTEXTD_API_KEY });

const text = (t) => ({ kind: { case: 'text', value: { text: t } } });
const lower = (enumObj, v) => enumObj[v].toLowerCase();

// A stand-in for an LLM: it inspects files for a while, then answers.
function callModel(messages, step) {
  const localTokens = messages.reduce((n, m) => n + Number(m.tokens), 0);
  const usage = { inputTokens: localTokens + 40, outputTokens: 60 }; // what the provider would bill
  if (step >= steps - 1) {
    return { usage, reply: { role: Role.ASSISTANT, parts: [text('All tests pass now. The bug was an off-by-one in src/parser.js.')] } };
  }
  const id = `call_${step}`;
  return {
    usage,
    reply: {
      role: Role.ASSISTANT,
      parts: [
        text(`Step ${step}: I'll look at the next file.`),
        { kind: { case: 'toolCall', value: { id, name: 'bash', argumentsJson: JSON.stringify({ command: `cat src/module_${step}.js` }) } } },
      ],
    },
  };
}

// A stand-in for running a tool.
function runTool(call, step) {
  const lines = Array.from({ length: 40 }, (_, i) => `module_${step}.js:${i + 1}: export function f${i}(x) { return x + ${i}; }`);
  return { role: Role.TOOL, parts: [{ kind: { case: 'toolResult', value: { toolCallId: call.id, content: lines.join('\n') } } }] };
}

async function main() {
  const sessionId = `agent-${process.pid}`;
  await client.createSession({
    id: sessionId,
    model: 'gpt-4', // an 8k window, so compaction shows up quickly
    systemPrompt: 'You are a coding agent. Use the bash tool to inspect files.',
    tools: [{ name: 'bash', description: 'Run a shell command.', parametersJson: JSON.stringify({ type: 'object', properties: { command: { type: 'string' } } }) }],
    policy: { warningThreshold: 0.65, criticalThreshold: 0.65 }, // "summarize at 65 %"
  });

  // Watch the status like a dashboard would.
  const stopWatch = new AbortController();
  const watching = (async () => {
    for await (const st of watchStatus(client, { sessionId, signal: stopWatch.signal })) {
      const u = st.usage;
      console.log(`[watch] v${st.version} ${lower(StatusEvent, st.event)}: ` +
        `${u.usedTokens}/${u.contextWindow - u.reservedOutputTokens} tokens (${u.percentUsed.toFixed(0)}%, ${lower(EstimateSource, u.estimateSource)})`);
    }
  })();

  const loop = new AgentLoop(client, sessionId);
  loop.add({ role: Role.USER, parts: [text('The tests in src/ fail. Find the bug and fix it.')] });
  let compactions = 0;
  for (let step = 0; step < steps; step++) {
    // PrepareContext with what is queued → the model call → ReportUsage.
    const { prepared } = await loop.step((messages) => {
      const { reply, usage } = callModel(messages, step);
      // Run the tools; the reply and their results go out with the next PrepareContext.
      const results = reply.parts.filter((p) => p.kind.case === 'toolCall').map((p) => runTool(p.kind.value, step));
      return { usage, append: [reply, ...results], output: undefined };
    });
    const status = prepared.status;
    if (status.compacted) {
      compactions++;
      const c = status.lastCompaction;
      console.log(`step ${step}: compacted (${c.tiers.join(' + ')}): ${c.tokensBefore} -> ${c.tokensAfter} tokens`);
    }
    for (const w of status.warnings) console.log(`step ${step}: warning: ${w}`);
  }
  await loop.flush(); // the final answer
  const { usage } = await client.getContextUsage({ source: { case: 'sessionId', value: sessionId } });
  const list = await client.listCompactions({ sessionId });
  console.log(`done: ${steps} model calls, ${list.compactions.length} compactions, ` +
    `${usage.usedTokens} tokens in the window (${lower(EstimateSource, usage.estimateSource)}, level ${lower(ContextLevel, usage.level)})`);
  stopWatch.abort();
  await watching;
  if (compactions === 0 || list.compactions.length !== compactions) {
    console.error('FAIL: expected automatic compactions');
    process.exit(1);
  }
}

main().catch((err) => { console.error('FAIL:', err.message); process.exit(1); });
