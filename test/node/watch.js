// Subscribes to contextd's WatchContextStatus from Node.js with @grpc/grpc-js,
// using the descriptor set that `make generate` builds with buf
// (internal/api/contextd.binpb). Usage: node watch.js HOST:PORT
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const addr = process.argv[2] || 'localhost:50051';
const descriptor = fs.readFileSync(path.join(__dirname, '..', '..', 'internal', 'api', 'contextd.binpb'));
const def = protoLoader.loadFileDescriptorSetFromBuffer(descriptor, { longs: Number, enums: String, defaults: true });
const { ContextService } = grpc.loadPackageDefinition(def).contextd.v1;
const client = new ContextService(addr, grpc.credentials.createInsecure());

const call = (method, req) => new Promise((resolve, reject) =>
  client[method](req, { deadline: Date.now() + 10_000 }, (err, res) => (err ? reject(err) : resolve(res))));

const fail = (msg) => { console.error('FAIL:', msg); process.exit(1); };
setTimeout(() => fail('timed out waiting for updates'), 20_000).unref();

async function main() {
  const sessionId = `node-${process.pid}`;
  await call('CreateSession', { id: sessionId, model: 'gpt-4o', system_prompt: 'You are a coding agent.' });

  const seen = [];
  const stream = client.WatchContextStatus({ session_id: sessionId, heartbeat_seconds: 1 });
  const done = new Promise((resolve, reject) => {
    stream.on('data', ({ status }) => {
      seen.push(status.event);
      console.log(`event=${status.event} version=${status.version} used=${status.usage ? status.usage.used_tokens : '-'}`);
      if (status.event === 'STATUS_EVENT_APPENDED' && status.version === 4) resolve(status);
    });
    stream.on('error', (err) => { if (err.code !== grpc.status.CANCELLED) reject(err); });
  });

  // Wait for the snapshot, then append three messages.
  await new Promise((resolve) => stream.once('data', resolve));
  for (const text of ['Fix the bug in main.go', 'Also add a test', 'Thanks']) {
    await call('AppendMessages', { session_id: sessionId, messages: [{ role: 'ROLE_USER', parts: [{ text: { text } }] }] });
  }
  const last = await done;
  if (seen[0] !== 'STATUS_EVENT_SNAPSHOT') fail(`first event was ${seen[0]}`);
  if (last.usage.message_count !== 3 || !(last.usage.used_tokens > 0)) fail(`bad usage ${JSON.stringify(last.usage)}`);
  stream.cancel();
  client.close();
  console.log('OK: node client received the snapshot and', seen.length - 1, 'updates');
}

main().catch((err) => fail(err.stack || String(err)));
