"""An agent loop around contextd with the typed Python client (clients/python).

Before every model call the agent sends what happened since the last one
(PrepareContext) and gets back the messages to send, compacted when the
session's policy says so. After the call it reports what the provider billed
(ReportUsage). contextd_client.AgentLoop does those three steps; a background
thread watches the context status (StatusWatch) as a dashboard would.

    pip install ./clients/python       # or PYTHONPATH=clients/python/src
    python3 examples/python/agent.py [HOST:PORT] [STEPS]
    (CONTEXTD_API_KEY=<key> when the server has API keys)

The model is a scripted stand-in so the example runs anywhere; replace
call_model with your provider's SDK.
"""

import json
import os
import sys
import threading

from contextd_client import AgentLoop, ModelTurn, StatusWatch, Usage, connect, service, types


def text(t):
    return types.Part(text=types.TextPart(text=t))


def call_model(messages, step, steps):
    """A stand-in for an LLM: it inspects files for a while, then answers."""
    local = sum(m.tokens for m in messages)
    usage = Usage(input_tokens=local + 40, output_tokens=60)  # what the provider would bill
    if step >= steps - 1:
        return types.Message(role=types.ROLE_ASSISTANT, parts=[text("All tests pass now.")]), usage
    call = types.ToolCallPart(id="call_%d" % step, name="bash",
                              arguments_json=json.dumps({"command": "cat src/module_%d.py" % step}))
    return types.Message(role=types.ROLE_ASSISTANT, parts=[
        text("Step %d: I'll look at the next file." % step), types.Part(tool_call=call)]), usage


def run_tool(call, step):
    """A stand-in for running a tool."""
    lines = ["module_%d.py:%d: def f%d(x): return x + %d" % (step, i + 1, i, i) for i in range(40)]
    return types.Message(role=types.ROLE_TOOL, parts=[
        types.Part(tool_result=types.ToolResultPart(tool_call_id=call.id, content="\n".join(lines)))])


def lower(enum, value, prefix):
    return enum.Name(value)[len(prefix):].lower()


def main():
    addr = sys.argv[1] if len(sys.argv) > 1 else "localhost:50051"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    client = connect(addr, token=os.environ.get("CONTEXTD_API_KEY"))
    session = "py-agent-%d" % os.getpid()
    client.CreateSession(service.CreateSessionRequest(
        id=session, model="gpt-4",  # an 8k window, so compaction shows up quickly
        system_prompt="You are a coding agent. Use the bash tool to inspect files.",
        tools=[types.ToolDefinition(name="bash", description="Run a shell command.", parameters_json=json.dumps(
            {"type": "object", "properties": {"command": {"type": "string"}}}))],
        policy=types.CompactionPolicy(warning_threshold=0.65, critical_threshold=0.65),  # "summarize at 65 %"
    ))

    watch = StatusWatch(client, session_id=session)

    def show():
        for st in watch:
            u = st.usage
            print("[watch] v%d %s: %d/%d tokens (%.0f%%, %s)" % (
                st.version, lower(types.StatusEvent, st.event, "STATUS_EVENT_"), u.used_tokens,
                u.context_window - u.reserved_output_tokens, u.percent_used,
                lower(types.EstimateSource, u.estimate_source, "ESTIMATE_SOURCE_")), flush=True)

    watcher = threading.Thread(target=show)
    watcher.start()

    loop = AgentLoop(client, session)
    loop.add(types.Message(role=types.ROLE_USER, parts=[text("The tests in src/ fail. Find the bug and fix it.")]))
    compactions = 0
    for step in range(steps):
        def model(messages, status, step=step):
            reply, usage = call_model(messages, step, steps)
            # Run the tools; the reply and their results go out with the next PrepareContext.
            results = [run_tool(p.tool_call, step) for p in reply.parts if p.WhichOneof("kind") == "tool_call"]
            return ModelTurn(output=None, usage=usage, append=[reply] + results)

        status = loop.step(model).prepared.status
        if status.compacted:
            compactions += 1
            c = status.last_compaction
            print("step %d: compacted (%s): %d -> %d tokens" % (step, " + ".join(c.tiers), c.tokens_before, c.tokens_after),
                  flush=True)
        for w in status.warnings:
            print("step %d: warning: %s" % (step, w), flush=True)
    loop.flush()  # the final answer
    usage = client.GetContextUsage(service.GetContextUsageRequest(session_id=session)).usage
    listed = client.ListCompactions(service.ListCompactionsRequest(session_id=session)).compactions
    print("done: %d model calls, %d compactions, %d tokens in the window (%s, level %s)" % (
        steps, len(listed), usage.used_tokens, lower(types.EstimateSource, usage.estimate_source, "ESTIMATE_SOURCE_"),
        lower(types.ContextLevel, usage.level, "CONTEXT_LEVEL_")), flush=True)
    watch.cancel()
    watcher.join()
    client.close()
    if compactions == 0 or len(listed) != compactions:
        sys.exit("FAIL: expected automatic compactions")


if __name__ == "__main__":
    main()
