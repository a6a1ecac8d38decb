from buf.validate import validate_pb2 as _validate_pb2
from contextd.v1 import types_pb2 as _types_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
NOTHING_TO_COMPACT_ALL_KEPT: NothingToCompact
NOTHING_TO_COMPACT_BELOW_TARGET: NothingToCompact
NOTHING_TO_COMPACT_EMPTY: NothingToCompact
NOTHING_TO_COMPACT_SUMMARIZER_FAILED: NothingToCompact
NOTHING_TO_COMPACT_UNSPECIFIED: NothingToCompact

class AppendMessagesRequest(_message.Message):
    __slots__ = ["expected_version", "idempotency_key", "include_content", "messages", "session_id"]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_CONTENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    expected_version: int
    idempotency_key: str
    include_content: bool
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., idempotency_key: _Optional[str] = ..., expected_version: _Optional[int] = ..., include_content: bool = ...) -> None: ...

class AppendMessagesResponse(_message.Message):
    __slots__ = ["messages", "usage", "version", "warnings"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    usage: _types_pb2.ContextUsage
    version: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., version: _Optional[int] = ..., usage: _Optional[_Union[_types_pb2.ContextUsage, _Mapping]] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class ClearMessagesRequest(_message.Message):
    __slots__ = ["expected_version", "keep_first_user_message", "session_id"]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    KEEP_FIRST_USER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    expected_version: int
    keep_first_user_message: bool
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., keep_first_user_message: bool = ..., expected_version: _Optional[int] = ...) -> None: ...

class ClearMessagesResponse(_message.Message):
    __slots__ = ["compaction", "session"]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    compaction: _types_pb2.Compaction
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ..., compaction: _Optional[_Union[_types_pb2.Compaction, _Mapping]] = ...) -> None: ...

class CompactRequest(_message.Message):
    __slots__ = ["dry_run", "dry_run_llm", "instructions", "session_id", "target", "tier"]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_LLM_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    dry_run: bool
    dry_run_llm: bool
    instructions: str
    session_id: str
    target: float
    tier: _types_pb2.CompactionTier
    def __init__(self, session_id: _Optional[str] = ..., tier: _Optional[_Union[_types_pb2.CompactionTier, str]] = ..., dry_run: bool = ..., instructions: _Optional[str] = ..., target: _Optional[float] = ..., dry_run_llm: bool = ...) -> None: ...

class CompactResponse(_message.Message):
    __slots__ = ["compacted", "compaction", "dry_run", "nothing_detail", "nothing_reason", "usage", "version", "warnings"]
    COMPACTED_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    NOTHING_DETAIL_FIELD_NUMBER: _ClassVar[int]
    NOTHING_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    compacted: bool
    compaction: _types_pb2.Compaction
    dry_run: bool
    nothing_detail: str
    nothing_reason: NothingToCompact
    usage: _types_pb2.ContextUsage
    version: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, compacted: bool = ..., dry_run: bool = ..., compaction: _Optional[_Union[_types_pb2.Compaction, _Mapping]] = ..., usage: _Optional[_Union[_types_pb2.ContextUsage, _Mapping]] = ..., version: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ..., nothing_reason: _Optional[_Union[NothingToCompact, str]] = ..., nothing_detail: _Optional[str] = ...) -> None: ...

class CountTokensRequest(_message.Message):
    __slots__ = ["encoding", "messages", "model", "system_prompt", "text", "tools"]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    encoding: str
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    model: str
    system_prompt: str
    text: str
    tools: _containers.RepeatedCompositeFieldContainer[_types_pb2.ToolDefinition]
    def __init__(self, model: _Optional[str] = ..., encoding: _Optional[str] = ..., text: _Optional[str] = ..., system_prompt: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_types_pb2.ToolDefinition, _Mapping]]] = ..., messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ...) -> None: ...

class CountTokensResponse(_message.Message):
    __slots__ = ["encoding", "exact", "messages", "messages_tokens", "model", "system_tokens", "tools", "tools_tokens", "total_tokens", "warnings"]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    EXACT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    encoding: str
    exact: bool
    messages: _containers.RepeatedCompositeFieldContainer[MessageCount]
    messages_tokens: int
    model: str
    system_tokens: int
    tools: _containers.RepeatedCompositeFieldContainer[ToolCount]
    tools_tokens: int
    total_tokens: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, total_tokens: _Optional[int] = ..., encoding: _Optional[str] = ..., model: _Optional[str] = ..., exact: bool = ..., system_tokens: _Optional[int] = ..., tools_tokens: _Optional[int] = ..., messages_tokens: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[MessageCount, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[ToolCount, _Mapping]]] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateHandoffRequest(_message.Message):
    __slots__ = ["create_session", "new_session_id", "session_id"]
    CREATE_SESSION_FIELD_NUMBER: _ClassVar[int]
    NEW_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    create_session: bool
    new_session_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., create_session: bool = ..., new_session_id: _Optional[str] = ...) -> None: ...

class CreateHandoffResponse(_message.Message):
    __slots__ = ["document", "session"]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    document: str
    session: _types_pb2.Session
    def __init__(self, document: _Optional[str] = ..., session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["id", "labels", "model", "policy", "system_prompt", "tools"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    id: str
    labels: _containers.ScalarMap[str, str]
    model: str
    policy: _types_pb2.CompactionPolicy
    system_prompt: str
    tools: _containers.RepeatedCompositeFieldContainer[_types_pb2.ToolDefinition]
    def __init__(self, id: _Optional[str] = ..., model: _Optional[str] = ..., system_prompt: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_types_pb2.ToolDefinition, _Mapping]]] = ..., policy: _Optional[_Union[_types_pb2.CompactionPolicy, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ExpandMessageRequest(_message.Message):
    __slots__ = ["message_id", "page_token", "session_id"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    page_token: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., message_id: _Optional[str] = ..., page_token: _Optional[str] = ...) -> None: ...

class ExpandMessageResponse(_message.Message):
    __slots__ = ["message", "next_page_token", "originals"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORIGINALS_FIELD_NUMBER: _ClassVar[int]
    message: _types_pb2.Message
    next_page_token: str
    originals: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    def __init__(self, message: _Optional[_Union[_types_pb2.Message, _Mapping]] = ..., originals: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ExpandToolCallRequest(_message.Message):
    __slots__ = ["arguments", "round", "session_id"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    round: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., arguments: _Optional[str] = ..., round: _Optional[int] = ...) -> None: ...

class ExpandToolCallResponse(_message.Message):
    __slots__ = ["content", "is_error", "stop"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    content: str
    is_error: bool
    stop: bool
    def __init__(self, content: _Optional[str] = ..., is_error: bool = ..., stop: bool = ...) -> None: ...

class GetContextUsageRequest(_message.Message):
    __slots__ = ["inline", "session_id"]
    INLINE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    inline: InlineContext
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., inline: _Optional[_Union[InlineContext, _Mapping]] = ...) -> None: ...

class GetContextUsageResponse(_message.Message):
    __slots__ = ["usage"]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    usage: _types_pb2.ContextUsage
    def __init__(self, usage: _Optional[_Union[_types_pb2.ContextUsage, _Mapping]] = ...) -> None: ...

class GetMessagesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "session_id", "view"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    session_id: str
    view: _types_pb2.MessageView
    def __init__(self, session_id: _Optional[str] = ..., view: _Optional[_Union[_types_pb2.MessageView, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetMessagesResponse(_message.Message):
    __slots__ = ["messages", "next_page_token", "version"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    next_page_token: str
    version: int
    def __init__(self, messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ...) -> None: ...

class InlineContext(_message.Message):
    __slots__ = ["messages", "model", "policy", "system_prompt", "tools"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    model: str
    policy: _types_pb2.CompactionPolicy
    system_prompt: str
    tools: _containers.RepeatedCompositeFieldContainer[_types_pb2.ToolDefinition]
    def __init__(self, model: _Optional[str] = ..., system_prompt: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_types_pb2.ToolDefinition, _Mapping]]] = ..., messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., policy: _Optional[_Union[_types_pb2.CompactionPolicy, _Mapping]] = ...) -> None: ...

class ListCompactionsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "session_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListCompactionsResponse(_message.Message):
    __slots__ = ["compactions", "next_page_token"]
    COMPACTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    compactions: _containers.RepeatedCompositeFieldContainer[_types_pb2.Compaction]
    next_page_token: str
    def __init__(self, compactions: _Optional[_Iterable[_Union[_types_pb2.Compaction, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ["default_model", "models"]
    DEFAULT_MODEL_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    default_model: ModelInfo
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ..., default_model: _Optional[_Union[ModelInfo, _Mapping]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["labels", "page_size", "page_token"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.ScalarMap[str, str]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    sessions: _containers.RepeatedCompositeFieldContainer[_types_pb2.Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[_types_pb2.Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class MessageCount(_message.Message):
    __slots__ = ["framing_tokens", "index", "parts", "tokens"]
    FRAMING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    framing_tokens: int
    index: int
    parts: _containers.RepeatedCompositeFieldContainer[PartCount]
    tokens: int
    def __init__(self, index: _Optional[int] = ..., tokens: _Optional[int] = ..., framing_tokens: _Optional[int] = ..., parts: _Optional[_Iterable[_Union[PartCount, _Mapping]]] = ...) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ["aliases", "context_window", "encoding", "exact", "expected_error", "max_output_tokens", "name", "pricing", "provider"]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    EXACT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_ERROR_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRICING_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    aliases: _containers.RepeatedScalarFieldContainer[str]
    context_window: int
    encoding: str
    exact: bool
    expected_error: float
    max_output_tokens: int
    name: str
    pricing: _types_pb2.ModelPricing
    provider: str
    def __init__(self, name: _Optional[str] = ..., aliases: _Optional[_Iterable[str]] = ..., provider: _Optional[str] = ..., context_window: _Optional[int] = ..., max_output_tokens: _Optional[int] = ..., encoding: _Optional[str] = ..., exact: bool = ..., expected_error: _Optional[float] = ..., pricing: _Optional[_Union[_types_pb2.ModelPricing, _Mapping]] = ...) -> None: ...

class PartCount(_message.Message):
    __slots__ = ["index", "kind", "tokens"]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    index: int
    kind: str
    tokens: int
    def __init__(self, index: _Optional[int] = ..., kind: _Optional[str] = ..., tokens: _Optional[int] = ...) -> None: ...

class PrepareContextRequest(_message.Message):
    __slots__ = ["expected_version", "idempotency_key", "messages", "session_id", "view_token"]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    VIEW_TOKEN_FIELD_NUMBER: _ClassVar[int]
    expected_version: int
    idempotency_key: str
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    session_id: str
    view_token: str
    def __init__(self, session_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., idempotency_key: _Optional[str] = ..., expected_version: _Optional[int] = ..., view_token: _Optional[str] = ...) -> None: ...

class PrepareContextResponse(_message.Message):
    __slots__ = ["cache", "delta", "messages", "status", "tools", "view_token"]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    VIEW_TOKEN_FIELD_NUMBER: _ClassVar[int]
    cache: _types_pb2.CacheHints
    delta: bool
    messages: _containers.RepeatedCompositeFieldContainer[_types_pb2.Message]
    status: _types_pb2.ContextStatus
    tools: _containers.RepeatedCompositeFieldContainer[_types_pb2.ToolDefinition]
    view_token: str
    def __init__(self, messages: _Optional[_Iterable[_Union[_types_pb2.Message, _Mapping]]] = ..., status: _Optional[_Union[_types_pb2.ContextStatus, _Mapping]] = ..., cache: _Optional[_Union[_types_pb2.CacheHints, _Mapping]] = ..., view_token: _Optional[str] = ..., delta: bool = ..., tools: _Optional[_Iterable[_Union[_types_pb2.ToolDefinition, _Mapping]]] = ...) -> None: ...

class ReportUsageRequest(_message.Message):
    __slots__ = ["cache_creation_input_tokens", "cache_read_input_tokens", "idempotency_key", "input_tokens", "message_count", "output_tokens", "session_id", "version", "view_token"]
    CACHE_CREATION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VIEW_TOKEN_FIELD_NUMBER: _ClassVar[int]
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    idempotency_key: str
    input_tokens: int
    message_count: int
    output_tokens: int
    session_id: str
    version: int
    view_token: str
    def __init__(self, session_id: _Optional[str] = ..., input_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ..., cache_creation_input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., message_count: _Optional[int] = ..., version: _Optional[int] = ..., view_token: _Optional[str] = ...) -> None: ...

class ReportUsageResponse(_message.Message):
    __slots__ = ["usage"]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    usage: _types_pb2.ContextUsage
    def __init__(self, usage: _Optional[_Union[_types_pb2.ContextUsage, _Mapping]] = ...) -> None: ...

class RevertCompactionRequest(_message.Message):
    __slots__ = ["compaction_id", "session_id"]
    COMPACTION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    compaction_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., compaction_id: _Optional[str] = ...) -> None: ...

class RevertCompactionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ...) -> None: ...

class ToolCount(_message.Message):
    __slots__ = ["name", "tokens"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    name: str
    tokens: int
    def __init__(self, name: _Optional[str] = ..., tokens: _Optional[int] = ...) -> None: ...

class UpdateSessionRequest(_message.Message):
    __slots__ = ["expected_version", "labels", "model", "policy", "session_id", "system_prompt", "tools", "update_mask"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    expected_version: int
    labels: _containers.ScalarMap[str, str]
    model: str
    policy: _types_pb2.CompactionPolicy
    session_id: str
    system_prompt: str
    tools: _containers.RepeatedCompositeFieldContainer[_types_pb2.ToolDefinition]
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, session_id: _Optional[str] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., model: _Optional[str] = ..., system_prompt: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_types_pb2.ToolDefinition, _Mapping]]] = ..., policy: _Optional[_Union[_types_pb2.CompactionPolicy, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class UpdateSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ...) -> None: ...

class WatchContextStatusRequest(_message.Message):
    __slots__ = ["from_version", "heartbeat_seconds", "session_id"]
    FROM_VERSION_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    from_version: int
    heartbeat_seconds: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., from_version: _Optional[int] = ..., heartbeat_seconds: _Optional[int] = ...) -> None: ...

class WatchContextStatusResponse(_message.Message):
    __slots__ = ["status"]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _types_pb2.ContextStatus
    def __init__(self, status: _Optional[_Union[_types_pb2.ContextStatus, _Mapping]] = ...) -> None: ...

class NothingToCompact(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
