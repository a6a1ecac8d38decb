"""Typed Python client for contextd.

The messages and the gRPC stub are generated from proto/ by `make generate`
(Debian's protoc 3.21.12 and grpc_python_plugin 1.51) and importable as
``contextd.v1.types_pb2``, ``contextd.v1.context_service_pb2`` and
``contextd.v1.context_service_pb2_grpc``; this package re-exports them as
``types``, ``service`` and ``service_grpc``. The hand-written part is small:

* :func:`connect` opens a channel (plaintext or TLS) that sends
  ``authorization: Bearer <key>`` with every call;
* :class:`StatusWatch` iterates over a session's ContextStatus and watches
  again from the last version after UNAVAILABLE (a replica shutting down);
* :class:`AgentLoop` runs PrepareContext → your model call → ReportUsage;
* :func:`model_tools` and :func:`answer_expand_call` offer and answer the
  contextd_expand tool (the policy's expose_expand_tool), only when the
  PrepareContext response offers it (:func:`expand_offered`).
"""

from contextd.v1 import context_service_pb2 as service
from contextd.v1 import context_service_pb2_grpc as service_grpc
from contextd.v1 import types_pb2 as types

from contextd_client._agent import AgentLoop, ModelTurn, StepResult, Usage
from contextd_client._expand import EXPAND_TOOL_NAME, ExpandAnswer, answer_expand_call, expand_offered, model_tools
from contextd_client._channel import Client, bearer_token_interceptor, connect
from contextd_client._watch import StatusWatch

__all__ = [
    "EXPAND_TOOL_NAME",
    "AgentLoop",
    "Client",
    "ExpandAnswer",
    "ModelTurn",
    "StatusWatch",
    "StepResult",
    "Usage",
    "answer_expand_call",
    "bearer_token_interceptor",
    "connect",
    "expand_offered",
    "model_tools",
    "service",
    "service_grpc",
    "types",
]
