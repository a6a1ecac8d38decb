"""An agent loop around contextd in Python with grpcio.

Before every model call the agent sends what happened since the last one
(PrepareContext) and gets back the messages to send, compacted when the
session's policy says so. After the call it reports what the provider billed
(ReportUsage). A background thread watches the context status
(WatchContextStatus) as a dashboard would.

No generated stubs: the message classes come from the descriptor set that
`make generate` builds with buf (internal/api/contextd.binpb), and the RPCs
are called by name.

    pip install grpcio protobuf
    python agent.py [HOST:PORT] [STEPS]

The model is a scripted stand-in so the example runs anywhere; replace
call_model with your provider's SDK.
"""

import json
import os
import sys
import threading

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

HERE = os.path.dirname(os.path.abspath(__file__))
DESCRIPTOR_SET = os.path.join(HERE, "..", "..", "internal", "api", "contextd.binpb")
SERVICE = "/contextd.v1.ContextService/"


def load_types():
    """Builds message classes for every type of the descriptor set."""
    fds = descriptor_pb2.FileDescriptorSet.FromString(open(DESCRIPTOR_SET, "rb").read())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:  # buf writes dependencies first
        pool.Add(f)
    return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName("contextd.v1." + name))


class Client:
    """A thin client: rpc("CreateSession", {...}) -> dict."""

    def __init__(self, addr):
        self.channel = grpc.insecure_channel(addr)
        self.type = load_types()

    def _stub(self, method, request, response, stream=False):
        make = self.channel.unary_stream if stream else self.channel.unary_unary
        return make(SERVICE + method, request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=self.type(response).FromString)

    def rpc(self, method, body):
        req = json_format.ParseDict(body, self.type(method + "Request")())
        resp = self._stub(method, req, method + "Response")(req, timeout=30)
        return json_format.MessageToDict(resp, preserving_proto_field_name=True)

    def watch(self, body):
        req = json_format.ParseDict(body, self.type("WatchContextStatusRequest")())
        for resp in self._stub("WatchContextStatus", req, "WatchContextStatusResponse", stream=True)(req):
            yield json_format.MessageToDict(resp.status, preserving_proto_field_name=True)


def call_model(messages, step, steps):
    """A stand-in for an LLM: it inspects files for a while, then answers."""
    local = sum(int(m.get("tokens", 0)) for m in messages)
    usage = {"input_tokens": local + 40, "output_tokens": 60}  # what the provider would bill
    if step >= steps - 1:
        return {"role": "ROLE_ASSISTANT", "parts": [{"text": {"text": "All tests pass now."}}]}, usage
    call_id = "call_%d" % step
    return {"role": "ROLE_ASSISTANT", "parts": [
        {"text": {"text": "Step %d: I'll look at the next file." % step}},
        {"tool_call": {"id": call_id, "name": "bash", "arguments_json": json.dumps({"command": "cat src/module_%d.py" % step})}},
    ]}, usage


def run_tool(tool_call, step):
    """A stand-in for running a tool."""
    lines = ["module_%d.py:%d: def f%d(x): return x + %d" % (step, i + 1, i, i) for i in range(40)]
    return {"role": "ROLE_TOOL", "parts": [{"tool_result": {"tool_call_id": tool_call["id"], "content": "\n".join(lines)}}]}


def main():
    addr = sys.argv[1] if len(sys.argv) > 1 else "localhost:50051"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    c = Client(addr)
    session = "py-agent-%d" % os.getpid()
    c.rpc("CreateSession", {
        "id": session, "model": "gpt-4", "system_prompt": "You are a coding agent.",
        "tools": [{"name": "bash", "description": "Run a shell command.",
                   "parameters_json": json.dumps({"type": "object", "properties": {"command": {"type": "string"}}})}],
        "policy": {"warning_threshold": 0.65, "critical_threshold": 0.65},
    })

    def watch():
        try:
            for st in c.watch({"session_id": session}):
                if st.get("event") == "STATUS_EVENT_HEARTBEAT":
                    continue
                u = st.get("usage", {})
                print("[watch] v%s %s: %s tokens (%.0f%%)" % (st.get("version"), st.get("event", "")[13:].lower(),
                                                             u.get("used_tokens", 0), u.get("percent_used", 0)))
        except grpc.RpcError:
            pass  # the channel closed at the end

    threading.Thread(target=watch, daemon=True).start()

    pending = [{"role": "ROLE_USER", "parts": [{"text": {"text": "The tests in src/ fail. Find the bug and fix it."}}]}]
    compactions = 0
    for step in range(steps):
        prep = c.rpc("PrepareContext", {"session_id": session, "messages": pending})
        status = prep["status"]
        if status.get("compacted"):
            compactions += 1
            lc = status["last_compaction"]
            print("step %d: compacted (%s): %s -> %s tokens" % (step, " + ".join(lc["tiers"]), lc["tokens_before"], lc["tokens_after"]))
        message, usage = call_model(prep["messages"], step, steps)
        c.rpc("ReportUsage", {"session_id": session, "input_tokens": usage["input_tokens"],
                              "output_tokens": usage["output_tokens"], "message_count": len(prep["messages"])})
        pending = [message] + [run_tool(p["tool_call"], step) for p in message["parts"] if "tool_call" in p]
    c.rpc("AppendMessages", {"session_id": session, "messages": pending})
    usage = c.rpc("GetContextUsage", {"session_id": session})["usage"]
    print("done: %d model calls, %d compactions, %s tokens in the window" % (steps, compactions, usage["used_tokens"]))
    c.channel.close()
    if compactions == 0:
        sys.exit("FAIL: expected automatic compactions")


if __name__ == "__main__":
    main()
