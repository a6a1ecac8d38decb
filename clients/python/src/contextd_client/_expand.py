"""The contextd_expand tool (the policy's expose_expand_tool): the tools to
send to the model, and the answers to the model's calls of it."""

from dataclasses import dataclass
from typing import List, Optional, Sequence

from contextd.v1 import context_service_pb2 as service
from contextd.v1 import types_pb2 as types

EXPAND_TOOL_NAME = "contextd_expand"


def model_tools(session_tools: Sequence[types.ToolDefinition],
                prepared: service.PrepareContextResponse) -> List[types.ToolDefinition]:
    """The tools to send to the model: the session's own, then those PrepareContext added."""
    return list(session_tools) + list(prepared.tools)


@dataclass
class ExpandAnswer:
    """The answer to one contextd_expand call."""

    message: types.Message  # the tool result to append for the model
    stop: bool  # the round limit was hit: the model must answer now; offer no further round


def expand_offered(prepared: service.PrepareContextResponse) -> bool:
    """Whether ``prepared`` offers contextd's tool: PrepareContext returns it
    only while the session's policy exposes it."""
    return any(t.name == EXPAND_TOOL_NAME for t in prepared.tools)


def answer_expand_call(client, session_id: str, prepared: service.PrepareContextResponse,
                       call: types.ToolCallPart, round: int) -> Optional[ExpandAnswer]:
    """Answers ``call`` with the ExpandToolCall RPC when it is a call of
    contextd's tool: named contextd_expand while ``prepared`` (the
    PrepareContext response whose tools the model was sent) offers it.

    None otherwise: the call is the caller's, a client tool's (one may be
    named contextd_expand while the option is off) or one of a tool the model
    was not offered. ``round`` is 1 for the first expand round of one model
    turn (every expand call of one model response is one round), 2 for the
    next. A call the model got wrong is answered as an error result;
    grpc.RpcError is the RPC's.
    """
    if call.name != EXPAND_TOOL_NAME or not expand_offered(prepared):
        return None
    res = client.ExpandToolCall(service.ExpandToolCallRequest(
        session_id=session_id, arguments=call.arguments_json, round=round))
    result = types.ToolResultPart(tool_call_id=call.id, content=res.content, is_error=res.is_error)
    return ExpandAnswer(message=types.Message(role=types.ROLE_TOOL, parts=[types.Part(tool_result=result)]), stop=res.stop)
