from buf.validate import validate_pb2 as _validate_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

CACHE_BREAKPOINT_KIND_REQUEST_END: CacheBreakpointKind
CACHE_BREAKPOINT_KIND_STABLE_PREFIX: CacheBreakpointKind
CACHE_BREAKPOINT_KIND_SUMMARY: CacheBreakpointKind
CACHE_BREAKPOINT_KIND_SYSTEM: CacheBreakpointKind
CACHE_BREAKPOINT_KIND_UNSPECIFIED: CacheBreakpointKind
COMPACTION_TIER_DROP_MIDDLE: CompactionTier
COMPACTION_TIER_PRUNE: CompactionTier
COMPACTION_TIER_SUMMARIZE: CompactionTier
COMPACTION_TIER_UNSPECIFIED: CompactionTier
CONTEXT_LEVEL_COMPACT: ContextLevel
CONTEXT_LEVEL_HANDOFF: ContextLevel
CONTEXT_LEVEL_OK: ContextLevel
CONTEXT_LEVEL_SUMMARIZE: ContextLevel
CONTEXT_LEVEL_UNSPECIFIED: ContextLevel
DESCRIPTOR: _descriptor.FileDescriptor
ESTIMATE_SOURCE_ANCHORED: EstimateSource
ESTIMATE_SOURCE_CALIBRATED: EstimateSource
ESTIMATE_SOURCE_ESTIMATED: EstimateSource
ESTIMATE_SOURCE_PROVIDER: EstimateSource
ESTIMATE_SOURCE_UNSPECIFIED: EstimateSource
MESSAGE_KIND_NORMAL: MessageKind
MESSAGE_KIND_PLACEHOLDER: MessageKind
MESSAGE_KIND_SUMMARY: MessageKind
MESSAGE_KIND_UNSPECIFIED: MessageKind
MESSAGE_VIEW_ACTIVE: MessageView
MESSAGE_VIEW_LOG: MessageView
MESSAGE_VIEW_UNSPECIFIED: MessageView
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
ROLE_TOOL: Role
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
STATUS_EVENT_APPENDED: StatusEvent
STATUS_EVENT_COMPACTED: StatusEvent
STATUS_EVENT_DELETED: StatusEvent
STATUS_EVENT_HEARTBEAT: StatusEvent
STATUS_EVENT_REVERTED: StatusEvent
STATUS_EVENT_SNAPSHOT: StatusEvent
STATUS_EVENT_UNSPECIFIED: StatusEvent
STATUS_EVENT_UPDATED: StatusEvent
STATUS_EVENT_WARNING: StatusEvent

class CacheBreakpoint(_message.Message):
    __slots__ = ["kind", "message_index", "prefix_tokens"]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_INDEX_FIELD_NUMBER: _ClassVar[int]
    PREFIX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    kind: CacheBreakpointKind
    message_index: int
    prefix_tokens: int
    def __init__(self, kind: _Optional[_Union[CacheBreakpointKind, str]] = ..., message_index: _Optional[int] = ..., prefix_tokens: _Optional[int] = ...) -> None: ...

class CacheHints(_message.Message):
    __slots__ = ["breakpoints", "compaction_changed_from", "fixed_stable", "has_previous", "request_tokens", "stable_prefix_messages", "stable_prefix_tokens"]
    BREAKPOINTS_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_CHANGED_FROM_FIELD_NUMBER: _ClassVar[int]
    FIXED_STABLE_FIELD_NUMBER: _ClassVar[int]
    HAS_PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STABLE_PREFIX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    STABLE_PREFIX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    breakpoints: _containers.RepeatedCompositeFieldContainer[CacheBreakpoint]
    compaction_changed_from: int
    fixed_stable: bool
    has_previous: bool
    request_tokens: int
    stable_prefix_messages: int
    stable_prefix_tokens: int
    def __init__(self, has_previous: bool = ..., fixed_stable: bool = ..., stable_prefix_messages: _Optional[int] = ..., stable_prefix_tokens: _Optional[int] = ..., request_tokens: _Optional[int] = ..., compaction_changed_from: _Optional[int] = ..., breakpoints: _Optional[_Iterable[_Union[CacheBreakpoint, _Mapping]]] = ...) -> None: ...

class Compaction(_message.Message):
    __slots__ = ["created_at", "expires_at", "id", "items", "reverted_at", "round", "summary", "tiers", "tokens_after", "tokens_before"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    REVERTED_AT_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TIERS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    id: str
    items: _containers.RepeatedCompositeFieldContainer[CompactionItem]
    reverted_at: _timestamp_pb2.Timestamp
    round: int
    summary: str
    tiers: _containers.RepeatedScalarFieldContainer[str]
    tokens_after: int
    tokens_before: int
    def __init__(self, id: _Optional[str] = ..., round: _Optional[int] = ..., tiers: _Optional[_Iterable[str]] = ..., tokens_before: _Optional[int] = ..., tokens_after: _Optional[int] = ..., items: _Optional[_Iterable[_Union[CompactionItem, _Mapping]]] = ..., summary: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., reverted_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CompactionInfo(_message.Message):
    __slots__ = ["created_at", "id", "reverted_at", "round", "tiers", "tokens_after", "tokens_before"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REVERTED_AT_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TIERS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    id: str
    reverted_at: _timestamp_pb2.Timestamp
    round: int
    tiers: _containers.RepeatedScalarFieldContainer[str]
    tokens_after: int
    tokens_before: int
    def __init__(self, id: _Optional[str] = ..., round: _Optional[int] = ..., tiers: _Optional[_Iterable[str]] = ..., tokens_before: _Optional[int] = ..., tokens_after: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., reverted_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CompactionItem(_message.Message):
    __slots__ = ["new_message_id", "reason", "replaced_message_ids", "tier", "tokens_after", "tokens_before"]
    NEW_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REPLACED_MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    new_message_id: str
    reason: str
    replaced_message_ids: _containers.RepeatedScalarFieldContainer[str]
    tier: str
    tokens_after: int
    tokens_before: int
    def __init__(self, tier: _Optional[str] = ..., new_message_id: _Optional[str] = ..., replaced_message_ids: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ..., tokens_before: _Optional[int] = ..., tokens_after: _Optional[int] = ...) -> None: ...

class CompactionPolicy(_message.Message):
    __slots__ = ["auto_compact", "cache_payback_calls", "cache_target", "critical_threshold", "emergency_threshold", "expose_expand_tool", "keep_human_tokens", "keep_recent_messages", "keep_recent_tokens", "protect_recent_tool_results", "reserved_output_tokens", "summarizer", "summary_max_tokens", "target", "warning_threshold"]
    AUTO_COMPACT_FIELD_NUMBER: _ClassVar[int]
    CACHE_PAYBACK_CALLS_FIELD_NUMBER: _ClassVar[int]
    CACHE_TARGET_FIELD_NUMBER: _ClassVar[int]
    CRITICAL_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    EMERGENCY_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    EXPOSE_EXPAND_TOOL_FIELD_NUMBER: _ClassVar[int]
    KEEP_HUMAN_TOKENS_FIELD_NUMBER: _ClassVar[int]
    KEEP_RECENT_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    KEEP_RECENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROTECT_RECENT_TOOL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    RESERVED_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZER_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WARNING_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    auto_compact: bool
    cache_payback_calls: int
    cache_target: float
    critical_threshold: float
    emergency_threshold: float
    expose_expand_tool: bool
    keep_human_tokens: int
    keep_recent_messages: int
    keep_recent_tokens: int
    protect_recent_tool_results: int
    reserved_output_tokens: int
    summarizer: str
    summary_max_tokens: int
    target: float
    warning_threshold: float
    def __init__(self, warning_threshold: _Optional[float] = ..., critical_threshold: _Optional[float] = ..., emergency_threshold: _Optional[float] = ..., target: _Optional[float] = ..., keep_recent_tokens: _Optional[int] = ..., keep_recent_messages: _Optional[int] = ..., protect_recent_tool_results: _Optional[int] = ..., auto_compact: bool = ..., reserved_output_tokens: _Optional[int] = ..., summary_max_tokens: _Optional[int] = ..., summarizer: _Optional[str] = ..., cache_payback_calls: _Optional[int] = ..., cache_target: _Optional[float] = ..., expose_expand_tool: bool = ..., keep_human_tokens: _Optional[int] = ...) -> None: ...

class ContextStatus(_message.Message):
    __slots__ = ["compacted", "event", "last_compaction", "ledger", "session_id", "time", "usage", "version", "warnings"]
    COMPACTED_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    LAST_COMPACTION_FIELD_NUMBER: _ClassVar[int]
    LEDGER_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    compacted: bool
    event: StatusEvent
    last_compaction: CompactionInfo
    ledger: Ledger
    session_id: str
    time: _timestamp_pb2.Timestamp
    usage: ContextUsage
    version: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_id: _Optional[str] = ..., version: _Optional[int] = ..., event: _Optional[_Union[StatusEvent, str]] = ..., usage: _Optional[_Union[ContextUsage, _Mapping]] = ..., compacted: bool = ..., last_compaction: _Optional[_Union[CompactionInfo, _Mapping]] = ..., warnings: _Optional[_Iterable[str]] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ledger: _Optional[_Union[Ledger, _Mapping]] = ...) -> None: ...

class ContextUsage(_message.Message):
    __slots__ = ["context_window", "encoding", "estimate_source", "exact", "expected_error", "free_tokens", "level", "message_count", "messages_tokens", "model", "model_known", "over_tokens", "percent_used", "recommendation", "reserved_output_tokens", "system_tokens", "thresholds", "tools_tokens", "used_tokens", "warnings", "will_compact"]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_SOURCE_FIELD_NUMBER: _ClassVar[int]
    EXACT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_ERROR_FIELD_NUMBER: _ClassVar[int]
    FREE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MODEL_KNOWN_FIELD_NUMBER: _ClassVar[int]
    OVER_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PERCENT_USED_FIELD_NUMBER: _ClassVar[int]
    RECOMMENDATION_FIELD_NUMBER: _ClassVar[int]
    RESERVED_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    THRESHOLDS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_TOKENS_FIELD_NUMBER: _ClassVar[int]
    USED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    WILL_COMPACT_FIELD_NUMBER: _ClassVar[int]
    context_window: int
    encoding: str
    estimate_source: EstimateSource
    exact: bool
    expected_error: float
    free_tokens: int
    level: ContextLevel
    message_count: int
    messages_tokens: int
    model: str
    model_known: bool
    over_tokens: int
    percent_used: float
    recommendation: str
    reserved_output_tokens: int
    system_tokens: int
    thresholds: CompactionPolicy
    tools_tokens: int
    used_tokens: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    will_compact: bool
    def __init__(self, model: _Optional[str] = ..., model_known: bool = ..., encoding: _Optional[str] = ..., exact: bool = ..., context_window: _Optional[int] = ..., system_tokens: _Optional[int] = ..., tools_tokens: _Optional[int] = ..., messages_tokens: _Optional[int] = ..., message_count: _Optional[int] = ..., reserved_output_tokens: _Optional[int] = ..., used_tokens: _Optional[int] = ..., free_tokens: _Optional[int] = ..., over_tokens: _Optional[int] = ..., percent_used: _Optional[float] = ..., thresholds: _Optional[_Union[CompactionPolicy, _Mapping]] = ..., level: _Optional[_Union[ContextLevel, str]] = ..., will_compact: bool = ..., recommendation: _Optional[str] = ..., estimate_source: _Optional[_Union[EstimateSource, str]] = ..., expected_error: _Optional[float] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class ImagePart(_message.Message):
    __slots__ = ["detail", "height", "media_type", "width"]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    detail: str
    height: int
    media_type: str
    width: int
    def __init__(self, media_type: _Optional[str] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., detail: _Optional[str] = ...) -> None: ...

class Ledger(_message.Message):
    __slots__ = ["cache_hit_rate", "calls", "compaction_overhead", "estimated", "total_cost_usd"]
    CACHE_HIT_RATE_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_OVERHEAD_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_USD_FIELD_NUMBER: _ClassVar[int]
    cache_hit_rate: float
    calls: LedgerTotals
    compaction_overhead: LedgerTotals
    estimated: LedgerTotals
    total_cost_usd: float
    def __init__(self, calls: _Optional[_Union[LedgerTotals, _Mapping]] = ..., compaction_overhead: _Optional[_Union[LedgerTotals, _Mapping]] = ..., cache_hit_rate: _Optional[float] = ..., total_cost_usd: _Optional[float] = ..., estimated: _Optional[_Union[LedgerTotals, _Mapping]] = ...) -> None: ...

class LedgerTotals(_message.Message):
    __slots__ = ["cache_read_tokens", "cache_write_tokens", "calls", "cost_usd", "input_tokens", "output_tokens", "unpriced_calls"]
    CACHE_READ_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    UNPRICED_CALLS_FIELD_NUMBER: _ClassVar[int]
    cache_read_tokens: int
    cache_write_tokens: int
    calls: int
    cost_usd: float
    input_tokens: int
    output_tokens: int
    unpriced_calls: int
    def __init__(self, calls: _Optional[int] = ..., input_tokens: _Optional[int] = ..., cache_read_tokens: _Optional[int] = ..., cache_write_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., unpriced_calls: _Optional[int] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["created_at", "id", "kind", "metadata", "name", "parts", "pinned", "position", "role", "tokens"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    id: str
    kind: MessageKind
    metadata: _containers.ScalarMap[str, str]
    name: str
    parts: _containers.RepeatedCompositeFieldContainer[Part]
    pinned: bool
    position: int
    role: Role
    tokens: int
    def __init__(self, id: _Optional[str] = ..., position: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., parts: _Optional[_Iterable[_Union[Part, _Mapping]]] = ..., name: _Optional[str] = ..., pinned: bool = ..., kind: _Optional[_Union[MessageKind, str]] = ..., tokens: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ModelPricing(_message.Message):
    __slots__ = ["cache_write", "cached_input", "input", "output"]
    CACHED_INPUT_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    cache_write: float
    cached_input: float
    input: float
    output: float
    def __init__(self, input: _Optional[float] = ..., cached_input: _Optional[float] = ..., cache_write: _Optional[float] = ..., output: _Optional[float] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ["image", "text", "tool_call", "tool_result"]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    image: ImagePart
    text: TextPart
    tool_call: ToolCallPart
    tool_result: ToolResultPart
    def __init__(self, text: _Optional[_Union[TextPart, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCallPart, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResultPart, _Mapping]] = ..., image: _Optional[_Union[ImagePart, _Mapping]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["created_at", "id", "labels", "last_compaction", "ledger", "log_count", "message_count", "model", "policy", "system_prompt", "tools", "updated_at", "usage", "version", "warnings"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LAST_COMPACTION_FIELD_NUMBER: _ClassVar[int]
    LEDGER_FIELD_NUMBER: _ClassVar[int]
    LOG_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    id: str
    labels: _containers.ScalarMap[str, str]
    last_compaction: CompactionInfo
    ledger: Ledger
    log_count: int
    message_count: int
    model: str
    policy: CompactionPolicy
    system_prompt: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolDefinition]
    updated_at: _timestamp_pb2.Timestamp
    usage: ContextUsage
    version: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., model: _Optional[str] = ..., system_prompt: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolDefinition, _Mapping]]] = ..., policy: _Optional[_Union[CompactionPolicy, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., version: _Optional[int] = ..., message_count: _Optional[int] = ..., log_count: _Optional[int] = ..., usage: _Optional[_Union[ContextUsage, _Mapping]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ledger: _Optional[_Union[Ledger, _Mapping]] = ..., last_compaction: _Optional[_Union[CompactionInfo, _Mapping]] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class TextPart(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ToolCallPart(_message.Message):
    __slots__ = ["arguments_json", "id", "name"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class ToolDefinition(_message.Message):
    __slots__ = ["description", "name", "parameters_json"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    description: str
    name: str
    parameters_json: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json: _Optional[str] = ...) -> None: ...

class ToolResultPart(_message.Message):
    __slots__ = ["content", "is_error", "tool_call_id"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    content: str
    is_error: bool
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., content: _Optional[str] = ..., is_error: bool = ...) -> None: ...

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MessageKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ContextLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class EstimateSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class StatusEvent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MessageView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class CompactionTier(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class CacheBreakpointKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
