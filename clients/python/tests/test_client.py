"""Tests of contextd_client against a live contextd (started by
test/e2e/python_test.go): CONTEXTD_ADDR is its address, CONTEXTD_TOKEN an API
key of tenant "acme", CONTEXTD_OTHER_TOKEN one of tenant "other".

    python3 -m unittest discover -s clients/python/tests
"""

import os
import socket
import threading
import unittest

import grpc

import json
import re

from contextd_client import (EXPAND_TOOL_NAME, AgentLoop, ModelTurn, StatusWatch, Usage, answer_expand_call, connect,
                             expand_offered, model_tools, service, types)

ADDR = os.environ.get("CONTEXTD_ADDR", "")
TOKEN = os.environ.get("CONTEXTD_TOKEN", "")
OTHER = os.environ.get("CONTEXTD_OTHER_TOKEN", "")
_seq = [0]


def new_id(name):
    _seq[0] += 1
    return "py-%s-%d-%d" % (name, os.getpid(), _seq[0])


def user(t):
    return types.Message(role=types.ROLE_USER, parts=[types.Part(text=types.TextPart(text=t))])


def tool_call(call_id, name, args):
    return types.Message(role=types.ROLE_ASSISTANT, parts=[types.Part(
        tool_call=types.ToolCallPart(id=call_id, name=name, arguments_json=args))])


def tool_result(call_id, content):
    return types.Message(role=types.ROLE_TOOL, parts=[types.Part(
        tool_result=types.ToolResultPart(tool_call_id=call_id, content=content))])


class Proxy:
    """A TCP forwarder to the server whose connections can be cut, as a
    replica that goes away cuts them."""

    def __init__(self, target):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.addr = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.conns = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.listener.close()
        self.cut()


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not (ADDR and TOKEN and OTHER):
            raise RuntimeError("CONTEXTD_ADDR, CONTEXTD_TOKEN and CONTEXTD_OTHER_TOKEN must be set")
        cls.client = connect(ADDR, token=TOKEN)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_count_tokens(self):
        res = self.client.CountTokens(service.CountTokensRequest(encoding="cl100k_base", text="hello world"))
        self.assertEqual(res.total_tokens, 2)
        self.assertTrue(res.exact)

    def test_no_key_is_unauthenticated_and_tenants_are_apart(self):
        with connect(ADDR) as anonymous, self.assertRaises(grpc.RpcError) as ctx:
            anonymous.ListModels(service.ListModelsRequest())
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        sid = new_id("mine")
        self.client.CreateSession(service.CreateSessionRequest(id=sid, model="gpt-4o"))
        with connect(ADDR, token=OTHER) as other, self.assertRaises(grpc.RpcError) as ctx:
            other.GetSession(service.GetSessionRequest(session_id=sid))
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertEqual(self.client.GetSession(service.GetSessionRequest(session_id=sid)).session.id, sid)

    def test_invalid_field_is_invalid_argument(self):
        with self.assertRaises(grpc.RpcError) as ctx:
            self.client.CountTokens(service.CountTokensRequest(encoding="no-such-encoding", text="x"))
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("encoding", ctx.exception.details())

    def test_agent_loop_reports_usage_and_takes_dicts(self):
        sid = new_id("agent")
        self.client.CreateSession(service.CreateSessionRequest(id=sid, model="gpt-4o"))
        loop = AgentLoop(self.client, sid)
        loop.add({"role": "ROLE_USER", "parts": [{"text": {"text": "hello"}}]})
        seen = []

        def model(messages, status):
            seen.append(len(messages))
            reply = types.Message(role=types.ROLE_ASSISTANT, parts=[types.Part(text=types.TextPart(text="hi"))])
            return ModelTurn(output="ok", usage=Usage(input_tokens=sum(m.tokens for m in messages) + 3, output_tokens=1),
                             append=[reply, user("again")])

        first = loop.step(model)
        second = loop.step(model)
        self.assertEqual((first.output, seen), ("ok", [1, 3]))
        self.assertNotEqual(second.usage.estimate_source, types.ESTIMATE_SOURCE_ESTIMATED)
        self.assertEqual(len(loop.queued), 2)
        loop.flush()
        msgs = self.client.GetMessages(service.GetMessagesRequest(session_id=sid)).messages
        self.assertEqual([m.role for m in msgs], [types.ROLE_USER, types.ROLE_ASSISTANT, types.ROLE_USER,
                                                  types.ROLE_ASSISTANT, types.ROLE_USER])

    def _expand_run(self, greedy):
        """A fake model expands the first placeholder it sees, 1000 bytes a
        round, and answers with the text when it ends (greedy: never)."""
        sid = new_id("greedy" if greedy else "expand")
        self.client.CreateSession(service.CreateSessionRequest(
            id=sid, model="gpt-4", policy=types.CompactionPolicy(expose_expand_tool=True)))
        contents, msgs = {}, [user("Fix the failing test.")]
        for i in range(16):
            call = "call_%d" % i
            contents[call] = "step %d: " % i + "lorem ipsum é dolor € sit 😀 amet " * 45
            msgs += [tool_call(call, "read", '{"path":"x"}'), tool_result(call, contents[call])]
        self.client.AppendMessages(service.AppendMessagesRequest(session_id=sid, messages=msgs))
        state = {"target": None, "offset": 0, "text": "", "calls": 0}

        def model(view, tools):
            if not any(t.name == EXPAND_TOOL_NAME for t in tools):
                return None, "no expand tool"
            if state["target"] is None:
                for m in view:
                    r = m.parts[0].tool_result if m.parts[0].HasField("tool_result") else None
                    named = r and m.kind == types.MESSAGE_KIND_PLACEHOLDER and re.search(r'contextd_expand with id "([^"]+)"', r.content)
                    if named:
                        state["target"] = (named.group(1), r.tool_call_id)
                        break
                if state["target"] is None:
                    return None, "no placeholder"
            elif not greedy:
                note, _, body = view[-1].parts[0].tool_result.content.partition("\n")
                state["text"] += body
                nxt = re.search(r'More follows: call contextd_expand with \{"id":"[^"]+","offset":(\d+)(?:,"cursor":"\d+:\d+")?\}', note)
                if not nxt:
                    return None, state["text"]
                state["offset"] = int(nxt.group(1))
            state["calls"] += 1
            args = json.dumps({"id": state["target"][0], "offset": state["offset"], "length": 1000})
            return types.ToolCallPart(id="x%d" % state["calls"], name=EXPAND_TOOL_NAME, arguments_json=args), None

        pending, rnd = [user("Go on.")], 0
        while True:
            prepared = self.client.PrepareContext(service.PrepareContextRequest(session_id=sid, messages=pending))
            call, answer = model(prepared.messages, model_tools([], prepared))
            if call is None:
                original = contents[state["target"][1]] if state["target"] else None
                return answer, rnd, None, original
            rnd += 1
            res = answer_expand_call(self.client, sid, prepared, call, rnd)
            pending = [types.Message(role=types.ROLE_ASSISTANT, parts=[types.Part(tool_call=call)]), res.message]
            if res.stop:
                return None, rnd, res, None

    def test_expand_tool_gives_the_original_back_and_stops_a_greedy_model(self):
        answer, rounds, stopped, original = self._expand_run(greedy=False)
        self.assertIsNone(stopped)
        self.assertGreaterEqual(rounds, 2)
        self.assertIsNotNone(original)
        self.assertEqual(answer, original)
        self.assertEqual(answer.encode(), original.encode())
        _, rounds, stopped, _ = self._expand_run(greedy=True)
        self.assertEqual(rounds, 4)  # CONTEXTD_EXPAND_MAX_ROUNDS (3) + 1
        result = stopped.message.parts[0].tool_result
        self.assertTrue(result.is_error)
        self.assertIn("answer with what you have", result.content)
        # Another tool's call is the caller's; so is a call named
        # contextd_expand when the option is off (a client tool of that name).
        own = new_id("own-tool")
        mine = types.ToolDefinition(name=EXPAND_TOOL_NAME, description="The client's own.", parameters_json='{"type":"object"}')
        self.client.CreateSession(service.CreateSessionRequest(id=own, model="gpt-4", tools=[mine]))
        off = self.client.PrepareContext(service.PrepareContextRequest(session_id=own))
        self.assertFalse(expand_offered(off))
        call = types.ToolCallPart(id="z", name=EXPAND_TOOL_NAME, arguments_json='{"id":"msg_1"}')
        self.assertIsNone(answer_expand_call(self.client, own, off, call, 1))
        sid = new_id("offered")
        self.client.CreateSession(service.CreateSessionRequest(
            id=sid, model="gpt-4", policy=types.CompactionPolicy(expose_expand_tool=True)))
        on = self.client.PrepareContext(service.PrepareContextRequest(session_id=sid))
        self.assertTrue(expand_offered(on))
        self.assertIsNone(answer_expand_call(self.client, sid, on, types.ToolCallPart(id="y", name="read"), 1))

    def test_failed_model_call_appends_nothing_twice(self):
        sid = new_id("retry")
        self.client.CreateSession(service.CreateSessionRequest(id=sid, model="gpt-4o"))
        loop = AgentLoop(self.client, sid)
        loop.add(user("hello"))

        def down(messages, status):
            raise RuntimeError("provider down")

        with self.assertRaises(RuntimeError):
            loop.step(down)
        again = loop.step(lambda messages, status: ModelTurn(output=len(messages)))
        self.assertEqual(again.output, 1)

    def test_watch_yields_appends_and_ends_after_deletion(self):
        sid = new_id("watch")
        created = self.client.CreateSession(service.CreateSessionRequest(id=sid, model="gpt-4o")).session
        events = []
        for st in StatusWatch(self.client, session_id=sid):
            events.append((st.event, st.version))
            if st.event == types.STATUS_EVENT_SNAPSHOT:
                self.client.AppendMessages(service.AppendMessagesRequest(session_id=sid, messages=[user("one")]))
            elif st.event == types.STATUS_EVENT_APPENDED:
                self.client.DeleteSession(service.DeleteSessionRequest(session_id=sid))
        self.assertEqual([e for e, _ in events],
                         [types.STATUS_EVENT_SNAPSHOT, types.STATUS_EVENT_APPENDED, types.STATUS_EVENT_DELETED])
        self.assertEqual(events[0][1], created.version)
        self.assertGreater(events[1][1], events[0][1])

    def test_watch_cancel_from_another_thread(self):
        sid = new_id("cancel")
        self.client.CreateSession(service.CreateSessionRequest(id=sid, model="gpt-4o"))
        watch = StatusWatch(self.client, session_id=sid)
        got = []
        for st in watch:
            got.append(st.event)
            threading.Timer(0.2, watch.cancel).start()
        self.assertEqual(got, [types.STATUS_EVENT_SNAPSHOT])

    def test_watch_resumes_after_connections_are_cut(self):
        sid = new_id("resume")
        self.client.CreateSession(service.CreateSessionRequest(id=sid, model="gpt-4o"))
        proxy = Proxy(ADDR)
        self.addCleanup(proxy.close)
        with connect(proxy.addr, token=TOKEN) as through:
            versions, cuts = [], 0
            watch = StatusWatch(through, session_id=sid, min_backoff=0.05)
            for st in watch:
                versions.append(st.version)
                if len(versions) == 4:
                    watch.cancel()
                    continue
                # A change the watch has not seen, then the connection dies.
                self.client.AppendMessages(service.AppendMessagesRequest(session_id=sid, messages=[user("m")]))
                if len(versions) <= 2:
                    proxy.cut()
                    cuts += 1
        self.assertEqual(cuts, 2)
        self.assertEqual(versions, sorted(set(versions)), "versions ascend, none twice")
        self.assertEqual(len(versions), 4)


if __name__ == "__main__":
    unittest.main()
