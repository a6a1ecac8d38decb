"""The agent loop: PrepareContext → the model call → ReportUsage."""

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, List, Mapping, Optional, Sequence, TypeVar, Union

from google.protobuf import json_format

from contextd.v1 import context_service_pb2 as service
from contextd.v1 import types_pb2 as types

T = TypeVar("T")
MessageLike = Union[types.Message, Mapping[str, Any]]


@dataclass
class Usage:
    """The usage block of the provider's response."""

    input_tokens: int  # Anthropic usage.input_tokens; OpenAI usage.prompt_tokens
    output_tokens: int = 0
    cache_read_input_tokens: int = 0  # Anthropic only (OpenAI: leave 0)
    cache_creation_input_tokens: int = 0  # Anthropic only


@dataclass
class ModelTurn(Generic[T]):
    """What the model call gives back to the loop."""

    output: T
    usage: Optional[Usage] = None  # None when the provider reported nothing
    append: Sequence[MessageLike] = field(default_factory=list)  # reply, tool results: sent with the next step


@dataclass
class StepResult(Generic[T]):
    prepared: service.PrepareContextResponse  # the messages sent and the status (compacted, last_compaction, ...)
    usage: Optional[types.ContextUsage]  # usage after the report
    output: T


def _message(m: MessageLike) -> types.Message:
    if isinstance(m, types.Message):
        return m
    return json_format.ParseDict(m, types.Message())


class AgentLoop:
    """The loop every agent runs around contextd.

    :meth:`step` sends the queued messages with PrepareContext, calls
    ``call_model(messages, status)`` with exactly the messages contextd
    returned, reports the provider's usage with ReportUsage and queues the
    turn's ``append`` for the next step. Queued messages carry an idempotency
    key kept until PrepareContext succeeds, so a step that failed on the
    network can be called again without appending anything twice.
    """

    def __init__(self, client, session_id: str):
        self._client = client
        self.session_id = session_id
        self._pending: List[types.Message] = []
        self._key: Optional[str] = None

    def add(self, *messages: MessageLike) -> None:
        """Queues messages (types.Message or dicts in the proto's JSON shape)."""
        self._pending.extend(_message(m) for m in messages)
        self._key = None  # a different batch needs a new key

    @property
    def queued(self) -> Sequence[types.Message]:
        return tuple(self._pending)

    def step(self, call_model: Callable[[Sequence[types.Message], types.ContextStatus], ModelTurn[T]]) -> StepResult[T]:
        if self._pending and self._key is None:
            self._key = uuid.uuid4().hex
        prepared = self._client.PrepareContext(service.PrepareContextRequest(
            session_id=self.session_id, messages=self._pending, idempotency_key=self._key or ""))
        self._pending, self._key = [], None
        turn = call_model(prepared.messages, prepared.status)
        usage = None
        if turn.usage is not None:
            u = turn.usage
            # The view_token names the view that was sent, even if the session
            # is compacted before this report arrives.
            which = ({"view_token": prepared.view_token} if prepared.view_token
                     else {"message_count": len(prepared.messages)})
            usage = self._client.ReportUsage(service.ReportUsageRequest(
                session_id=self.session_id, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                cache_read_input_tokens=u.cache_read_input_tokens,
                cache_creation_input_tokens=u.cache_creation_input_tokens, **which)).usage
        if turn.append:
            self.add(*turn.append)
        return StepResult(prepared=prepared, usage=usage, output=turn.output)

    def flush(self) -> None:
        """Appends what is still queued (the last reply) without preparing a call."""
        if not self._pending:
            return
        if self._key is None:
            self._key = uuid.uuid4().hex
        self._client.AppendMessages(service.AppendMessagesRequest(
            session_id=self.session_id, messages=self._pending, idempotency_key=self._key))
        self._pending, self._key = [], None
