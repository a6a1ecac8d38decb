// Tests of @contextd/client against a live contextd (started by
// test/e2e/typescript_test.go): CONTEXTD_ADDR is its address, CONTEXTD_TOKEN
// an API key of tenant "acme", CONTEXTD_OTHER_TOKEN one of tenant "other".
// Every case runs on every transport the package offers.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  AgentLoop,
  ContextService,
  EXPAND_TOOL_NAME,
  EstimateSource,
  MessageKind,
  Role,
  answerExpandCall,
  expandOffered,
  modelTools,
  StatusEvent,
  bearerAuth,
  watchStatus,
} from "@contextd/client";
import { createContextdClient as nodeClient } from "@contextd/client/node";
import { createContextdClient as webClient } from "@contextd/client/web";

const addr = process.env.CONTEXTD_ADDR;
const token = process.env.CONTEXTD_TOKEN;
const otherToken = process.env.CONTEXTD_OTHER_TOKEN;
if (!addr || !token || !otherToken) {
  throw new Error("CONTEXTD_ADDR, CONTEXTD_TOKEN and CONTEXTD_OTHER_TOKEN must be set (run through go test ./test/e2e)");
}
const baseUrl = `http://${addr}`;

const transports = {
  "node grpc": (opts) => nodeClient({ baseUrl, protocol: "grpc", ...opts }),
  "node connect (HTTP/1.1, binary)": (opts) => nodeClient({ baseUrl, protocol: "connect", ...opts }),
  "node connect (HTTP/2 h2c, JSON)": (opts) => nodeClient({ baseUrl, protocol: "connect", httpVersion: "2", useJson: true, ...opts }),
  "web connect (fetch)": (opts) => webClient({ baseUrl, protocol: "connect", ...opts }),
  "web grpc-web (fetch)": (opts) => webClient({ baseUrl, protocol: "grpc-web", ...opts }),
};

const user = (text) => ({ role: Role.USER, parts: [{ kind: { case: "text", value: { text } } }] });
const toolCallMsg = (id, name, argumentsJson) => ({ role: Role.ASSISTANT, parts: [{ kind: { case: "toolCall", value: { id, name, argumentsJson } } }] });
const toolResultMsg = (toolCallId, content) => ({ role: Role.TOOL, parts: [{ kind: { case: "toolResult", value: { toolCallId, content } } }] });
let seq = 0;
const newId = (name) => `ts-${name}-${process.pid}-${++seq}`;

for (const [name, make] of Object.entries(transports)) {
  describe(name, () => {
    const client = make({ token });

    test("counts tokens", async () => {
      const res = await client.countTokens({ encoding: "cl100k_base", text: "hello world" });
      assert.equal(res.totalTokens, 2n);
      assert.equal(res.encoding, "cl100k_base");
      assert.equal(res.exact, true);
    });

    test("no key is unauthenticated, another tenant's session is not found", async () => {
      const anonymous = make({});
      await assert.rejects(anonymous.listModels({}), (err) => ConnectError.from(err).code === Code.Unauthenticated);
      const id = newId("mine");
      await client.createSession({ id, model: "gpt-4o" });
      const other = make({ token: otherToken });
      await assert.rejects(other.getSession({ sessionId: id }), (err) => ConnectError.from(err).code === Code.NotFound);
      const got = await client.getSession({ sessionId: id });
      assert.equal(got.session?.id, id);
    });

    test("an invalid field is invalid_argument naming it", async () => {
      await assert.rejects(client.countTokens({ encoding: "no-such-encoding", text: "x" }), (err) => {
        const e = ConnectError.from(err);
        return e.code === Code.InvalidArgument && e.rawMessage.includes("encoding");
      });
    });

    test("the agent loop compacts on its own and calibrates from reported usage", async () => {
      const id = newId("agent");
      await client.createSession({
        id,
        model: "gpt-4", // 8k window: compaction comes quickly
        systemPrompt: "You are a coding agent.",
        policy: { warningThreshold: 0.65, criticalThreshold: 0.65 },
      });
      const loop = new AgentLoop(client, id);
      loop.add(user("The tests fail. Find the bug."));
      let compactions = 0;
      let last;
      for (let step = 0; step < 30; step++) {
        last = await loop.step((messages, status) => {
          assert.ok(messages.length > 0);
          if (status.compacted) compactions++;
          const local = messages.reduce((n, m) => n + Number(m.tokens), 0);
          const body = Array.from({ length: 40 }, (_, i) => `line ${i} of file ${step}: const x${i} = ${i};`).join("\n");
          return {
            usage: { inputTokens: local + 40, outputTokens: 20 },
            append: [
              { role: Role.ASSISTANT, parts: [{ kind: { case: "toolCall", value: { id: `c${step}`, name: "bash", argumentsJson: "{}" } } }] },
              { role: Role.TOOL, parts: [{ kind: { case: "toolResult", value: { toolCallId: `c${step}`, content: body } } }] },
            ],
            output: step,
          };
        });
        assert.equal(last.output, step);
      }
      assert.ok(compactions > 0, "expected automatic compactions");
      const list = await client.listCompactions({ sessionId: id });
      assert.equal(list.compactions.length, compactions);
      assert.notEqual(last.usage?.estimateSource, EstimateSource.ESTIMATED);
      assert.equal(loop.queued.length, 2);
      await loop.flush();
      assert.equal(loop.queued.length, 0);
      const msgs = await client.getMessages({ sessionId: id, pageSize: 1000 });
      assert.equal(msgs.messages.at(-1)?.role, Role.TOOL);
    });

    test("a failed model call appends nothing twice", async () => {
      const id = newId("retry");
      await client.createSession({ id, model: "gpt-4o" });
      const loop = new AgentLoop(client, id);
      loop.add(user("hello"));
      await assert.rejects(loop.step(() => { throw new Error("provider down"); }), /provider down/);
      const again = await loop.step((messages) => ({ output: messages.length }));
      assert.equal(again.output, 1, "the user message is in the view once");
    });

    test("a model expands a placeholder through the helper and gets the original byte for byte; a greedy one is stopped", async () => {
      const run = async (greedy) => {
        const id = newId(greedy ? "greedy" : "expand");
        await client.createSession({ id, model: "gpt-4", policy: { exposeExpandTool: true } });
        const contents = {};
        const msgs = [user("Fix the failing test.")];
        for (let i = 0; i < 16; i++) {
          const call = `call_${i}`;
          contents[call] = `step ${i}: ` + "lorem ipsum é dolor € sit 😀 amet ".repeat(45);
          msgs.push(toolCallMsg(call, "read", '{"path":"x"}'), toolResultMsg(call, contents[call]));
        }
        await client.appendMessages({ sessionId: id, messages: msgs });
        // The fake model: expands the first placeholder it sees, 1000 bytes a
        // round, and answers with the text when it ends (greedy: never).
        let target, offset = 0, text = "", calls = 0;
        const model = (view, tools) => {
          if (!tools.some((t) => t.name === EXPAND_TOOL_NAME)) return { answer: "no expand tool" };
          if (!target) {
            for (const m of view) {
              const r = m.parts[0].kind.case === "toolResult" ? m.parts[0].kind.value : undefined;
              const named = r && m.kind === MessageKind.PLACEHOLDER && r.content.match(/contextd_expand with id "([^"]+)"/);
              if (named) { target = { id: named[1], call: r.toolCallId }; break; }
            }
            if (!target) return { answer: "no placeholder" };
          } else if (!greedy) {
            const content = view.at(-1).parts[0].kind.value.content;
            const cut = content.indexOf("\n");
            text += content.slice(cut + 1);
            const next = content.slice(0, cut).match(/More follows: call contextd_expand with \{"id":"[^"]+","offset":(\d+)(?:,"cursor":"\d+:\d+")?\}/);
            if (!next) return { answer: text };
            offset = Number(next[1]);
          }
          calls++;
          return { call: { id: `x${calls}`, name: EXPAND_TOOL_NAME, argumentsJson: JSON.stringify({ id: target.id, offset, length: 1000 }) } };
        };
        let pending = [user("Go on.")];
        for (let round = 1; ; round++) {
          const prepared = await client.prepareContext({ sessionId: id, messages: pending });
          const turn = model(prepared.messages, modelTools([], prepared));
          if (!turn.call) return { answer: turn.answer, rounds: round - 1, original: contents[target?.call], session: id };
          const res = await answerExpandCall(client, id, prepared, turn.call, round);
          pending = [toolCallMsg(turn.call.id, turn.call.name, turn.call.argumentsJson), res.message];
          if (res.stop) return { stopped: res, rounds: round };
        }
      };
      const ok = await run(false);
      assert.equal(ok.stopped, undefined);
      assert.ok(ok.rounds >= 2, `${ok.rounds} rounds`);
      assert.ok(ok.original && ok.answer === ok.original, `expanded ${ok.answer.length} of ${ok.original?.length} characters`);
      const greedy = await run(true);
      assert.equal(greedy.rounds, 4); // CONTEXTD_EXPAND_MAX_ROUNDS (3) + 1
      const result = greedy.stopped.message.parts[0].kind.value;
      assert.ok(result.isError && result.content.includes("answer with what you have"), result.content);
      // Another tool's call is the caller's; so is a call named
      // contextd_expand when the option is off (a client tool of that name).
      const own = newId("own-tool");
      await client.createSession({ id: own, model: "gpt-4", tools: [{ name: EXPAND_TOOL_NAME, description: "The client's own.", parametersJson: '{"type":"object"}' }] });
      const offOwn = await client.prepareContext({ sessionId: own });
      assert.equal(expandOffered(offOwn), false);
      assert.equal(await answerExpandCall(client, own, offOwn, { id: "z", name: EXPAND_TOOL_NAME, argumentsJson: '{"id":"msg_1"}' }, 1), undefined);
      const on = await client.prepareContext({ sessionId: ok.session });
      assert.equal(expandOffered(on), true);
      assert.equal(await answerExpandCall(client, ok.session, on, { id: "y", name: "read", argumentsJson: "{}" }, 1), undefined);
    });

    test("watchStatus yields appends and stops on abort", async () => {
      const id = newId("watch");
      const created = await client.createSession({ id, model: "gpt-4o" });
      const ac = new AbortController();
      const seen = [];
      const watching = (async () => {
        for await (const st of watchStatus(client, { sessionId: id, signal: ac.signal })) {
          seen.push(st);
          if (st.event === StatusEvent.SNAPSHOT) {
            await client.appendMessages({ sessionId: id, messages: [user("one")] });
          } else if (seen.length === 2) {
            await client.appendMessages({ sessionId: id, messages: [user("two")] });
          } else if (seen.length === 3) {
            ac.abort();
          }
        }
      })();
      await watching; // returns, does not throw, on abort
      assert.deepEqual(seen.map((s) => s.event), [StatusEvent.SNAPSHOT, StatusEvent.APPENDED, StatusEvent.APPENDED]);
      assert.equal(seen[0].version, created.session.version);
      assert.ok(seen[1].version > seen[0].version && seen[2].version > seen[1].version);
      assert.ok(seen[2].usage.messageCount === 2n);
    });

    test("watchStatus ends after the watched session is deleted", async () => {
      const id = newId("gone");
      await client.createSession({ id, model: "gpt-4o" });
      const events = [];
      for await (const st of watchStatus(client, { sessionId: id })) {
        events.push(st.event);
        if (st.event === StatusEvent.SNAPSHOT) await client.deleteSession({ sessionId: id });
      }
      assert.deepEqual(events, [StatusEvent.SNAPSHOT, StatusEvent.DELETED]);
    });
  });
}

// The resume logic against a real server: an interceptor cuts the first two
// watch streams with UNAVAILABLE after one message, as a replica that shuts
// down does; watchStatus watches again from the last version it yielded.
test("watchStatus resumes after UNAVAILABLE without repeating a version", async () => {
  let cuts = 0;
  const cutter = (next) => async (req) => {
    if (req.method.name !== "WatchContextStatus") return next(req);
    const res = await next(req);
    if (cuts >= 2) return res;
    cuts++;
    return {
      ...res,
      message: (async function* () {
        for await (const m of res.message) {
          yield m;
          throw new ConnectError("replica shutting down", Code.Unavailable);
        }
      })(),
    };
  };
  const client = createClient(ContextService, createGrpcTransport({ baseUrl, interceptors: [bearerAuth(token), cutter] }));
  const currentId = newId("resume");
  await client.createSession({ id: currentId, model: "gpt-4o" });
  const seen = [];
  const ac = new AbortController();
  for await (const st of watchStatus(client, { sessionId: currentId, signal: ac.signal, minBackoffMs: 1 })) {
    seen.push(st);
    if (seen.length < 4) await client.appendMessages({ sessionId: currentId, messages: [user(`m${seen.length}`)] });
    else ac.abort();
  }
  assert.equal(cuts, 2);
  const versions = seen.map((s) => s.version);
  assert.deepEqual(versions, [...versions].sort((a, b) => (a < b ? -1 : 1)));
  assert.equal(new Set(versions).size, versions.length, "no version twice");
  assert.equal(seen[0].event, StatusEvent.SNAPSHOT);
  assert.equal(seen.length, 4);
});
