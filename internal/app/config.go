package app

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/engine"
)

// Config is the server configuration. Every field comes from an environment
// variable and may be overridden by the flag of the same name (CONTEXTD_LISTEN_ADDR
// ↔ --listen-addr).
type Config struct {
	ListenAddr  string
	MetricsAddr string
	// Pprof says when /debug/pprof is served on the metrics listener:
	// loopback (only on a loopback metrics address), on or off (pprof.go).
	Pprof           string
	LogLevel        slog.Level
	ModelsFile      string
	TokenizersDir   string
	DatabaseURL     string
	DataDir         string
	MaxMessageBytes int
	ShutdownTimeout time.Duration
	RevertWindow    time.Duration
	WatchMaxSubs    int
	// WatchMaxSubsPerTenant bounds one tenant's streams (0: a quarter of
	// WatchMaxSubs).
	WatchMaxSubsPerTenant int

	// Summarizers: the default spec and the provider endpoints.
	Summarizer string
	// SummarizersAllowed are the specs sessions may name in
	// policy.summarizer besides the default and "extractive"
	// ("PROVIDER:*": any model of a provider).
	SummarizersAllowed   []string
	SummarizerTimeout    time.Duration
	SummarizerMaxRetries int
	OpenAIBaseURL        string
	OpenAIAPIKey         string
	AnthropicBaseURL     string
	AnthropicAPIKey      string
	// AnthropicCountTokens counts Claude models with Anthropic's
	// count_tokens endpoint (cached an hour) instead of estimating.
	AnthropicCountTokens bool

	// Auth, TLS and limits.
	APIKeysFile        string
	Auth               string        // auto, on or off (CONTEXTD_AUTH)
	KeysReloadInterval time.Duration // how often the keys file is checked
	APIKeys            []string      // tenant:key pairs
	AuthExemptHealth   bool
	UI                 bool // serve the dashboard at /ui/
	Gateway            bool // serve the provider-compatible gateway at /v1/
	GatewayServerKeys  bool // the gateway sends the server's provider keys for clients without their own
	// GatewayKeepalive: a streamed answer the expand loop holds this long
	// starts with its headers and a comment line this often (0: never).
	GatewayKeepalive time.Duration
	// GatewaySessionTTL: gateway sessions idle this long are closed.
	GatewaySessionTTL time.Duration
	// StreamWriteTimeout bounds each write of a gateway answer.
	StreamWriteTimeout   time.Duration
	TLSCertFile          string
	TLSKeyFile           string
	TLSClientCAFile      string
	RateLimitRPS         float64
	RateLimitBurst       int
	MaxCountBytes        int
	MaxSessionsPerTenant int
	MaxConnectionAge     time.Duration
	// ViewCacheBytes bounds the engine's cache of decoded active views.
	ViewCacheBytes int
	// GatewayMemoBytes bounds the gateway's memo of parsed messages.
	GatewayMemoBytes int
	// Background compaction (engine.Background).
	Background engine.Background
	// CountBudgetBytes bounds the text of large requests (LargeCountBytes
	// and up) tokenized at once, server-wide; MaxConcurrentStreams bounds the
	// calls one connection may have open.
	CountBudgetBytes int
	MaxResponseBytes int
	LargeCountBytes  int
	// MaxViewBytes and MaxViewWindows bound a session's active view at
	// append (bytes; tokens as a multiple of its model's window).
	MaxViewBytes   int
	MaxViewWindows int
	// MaxViewMessages bounds a session's active view in messages and
	// MaxLogBytesPerTenant a tenant's stored messages in bytes, at append.
	MaxViewMessages      int
	MaxLogBytesPerTenant int
	MaxConcurrentStreams int
	// ExpandMaxRounds and ExpandToolBytes bound the contextd_expand tool:
	// rounds of one model turn, bytes of text of one answer.
	ExpandMaxRounds int
	ExpandToolBytes int

	// CORSAllowedOrigins are the browser origins allowed to call the API
	// cross-origin over Connect and gRPC-Web; empty: same origin only.
	CORSAllowedOrigins []string
	// AllowedHosts are the Host names served without authentication besides
	// the loopback names and the listen host (DNS rebinding guard); "*":
	// any.
	AllowedHosts []string
	// HTTPIdleTimeout closes a keep-alive connection idle this long.
	HTTPIdleTimeout time.Duration

	// Retention.
	RetentionInterval time.Duration
	ArchiveRetention  time.Duration
}

// envFlag describes one setting. A secret's value never shows in --help.
type envFlag struct {
	env, def, usage string
	secret          bool
}

var settings = []envFlag{
	{"CONTEXTD_LISTEN_ADDR", "localhost:50051", "listen address (gRPC, Connect, gRPC-Web); \":50051\" serves other hosts, which needs API keys or CONTEXTD_AUTH=off", false},
	{"CONTEXTD_METRICS_ADDR", "localhost:9090", "Prometheus metrics HTTP address (/metrics); empty disables; \":9090\" serves other hosts (no authentication: keep it off the public network)", false},
	{"CONTEXTD_PPROF", "loopback", "serve /debug/pprof on the metrics listener: loopback (only when CONTEXTD_METRICS_ADDR is a loopback address), on (any address: no authentication, keep it off the public network) or off", false},
	{"CONTEXTD_LOG_LEVEL", "info", "log level: debug, info, warn, error", false},
	{"CONTEXTD_MODELS_FILE", "", "JSON file of model registry overrides", false},
	{"CONTEXTD_TOKENIZERS_DIR", "", "directory of imported tokenizer vocabularies (contextd tokenizer import); Llama 3 counts exactly only with one", false},
	{"CONTEXTD_DATABASE_URL", "", "PostgreSQL URL; empty means embedded SQLite in CONTEXTD_DATA_DIR", true},
	{"CONTEXTD_DATA_DIR", "./data", "directory of the embedded SQLite database", false},
	{"CONTEXTD_MAX_MESSAGE_BYTES", "16777216", "largest request message accepted, in bytes", false},
	{"CONTEXTD_SHUTDOWN_TIMEOUT", "10s", "how long a graceful stop may take before open calls are cut", false},
	{"CONTEXTD_REVERT_WINDOW", "24h", "how long a compaction can be reverted", false},
	{"CONTEXTD_WATCH_MAX_SUBSCRIBERS", "10000", "most WatchContextStatus streams one server holds", false},
	{"CONTEXTD_WATCH_MAX_SUBSCRIBERS_PER_TENANT", "0", "most WatchContextStatus streams one tenant may hold on one server (0: a quarter of CONTEXTD_WATCH_MAX_SUBSCRIBERS)", false},
	{"CONTEXTD_SUMMARIZER", "extractive", "default summarizer: extractive, openai:MODEL or anthropic:MODEL", false},
	{"CONTEXTD_SUMMARIZERS_ALLOWED", "", "comma-separated summarizer specs sessions may name in policy.summarizer besides the default and extractive (openai:MODEL, anthropic:MODEL, or PROVIDER:* for any model); empty: only those two", false},
	{"CONTEXTD_SUMMARIZER_TIMEOUT", "20s", "timeout of one LLM summarization attempt", false},
	{"CONTEXTD_SUMMARIZER_MAX_RETRIES", "1", "retries of a failed LLM summarization before the extractive fallback", false},
	{"CONTEXTD_OPENAI_BASE_URL", "", "OpenAI-compatible API base URL (OpenRouter, vLLM, Ollama: http://localhost:11434/v1); empty: api.openai.com", false},
	{"CONTEXTD_OPENAI_API_KEY", "", "API key of the OpenAI-compatible endpoint", true},
	{"CONTEXTD_OPENAI_API_KEY_FILE", "", "file holding that API key (a mounted Secret)", false},
	{"CONTEXTD_ANTHROPIC_BASE_URL", "", "Anthropic API base URL; empty: api.anthropic.com", false},
	{"CONTEXTD_ANTHROPIC_API_KEY", "", "Anthropic API key", true},
	{"CONTEXTD_ANTHROPIC_API_KEY_FILE", "", "file holding the Anthropic API key", false},
	{"CONTEXTD_ANTHROPIC_COUNT_TOKENS", "false", "count Claude models with Anthropic's count_tokens endpoint (cached 1 h; local count on failure)", false},
	{"CONTEXTD_AUTH", "auto", "auto (on when keys are configured; without keys only a loopback listen address is served), on, or off (no authentication: every caller is tenant default)", false},
	{"CONTEXTD_API_KEYS_FILE", "", "file of API keys (JSON lines: id, tenant, sha256, revoked), reloaded when it changes and on SIGHUP", false},
	{"CONTEXTD_API_KEYS_RELOAD", "2s", "how often the keys file is checked for changes", false},
	{"CONTEXTD_API_KEYS", "", "comma-separated tenant:key pairs (hashed at start)", true},
	{"CONTEXTD_UI", "true", "serve the web dashboard at /ui/ on the listen address (it calls the API like any client: same keys, same tenants)", false},
	{"CONTEXTD_GATEWAY", "true", "serve the OpenAI- and Anthropic-compatible gateway at /v1/ on the listen address (forwards to CONTEXTD_OPENAI_BASE_URL and CONTEXTD_ANTHROPIC_BASE_URL; contextd's key in X-Contextd-Key)", false},
	{"CONTEXTD_GATEWAY_KEEPALIVE", "10s", "a streamed gateway answer held by the contextd_expand loop this long gets its headers and then an SSE comment line this often, so idle timeouts between the client and contextd do not cut it (0: hold silently)", false},
	{"CONTEXTD_STREAM_WRITE_TIMEOUT", "30s", "each write of a gateway answer to the client (an SSE event, a piece of a body) must complete within this long: a client that stops reading is cut and the upstream request cancelled (0: no deadline)", false},
	{"CONTEXTD_GATEWAY_SESSION_TTL", "168h", "a gateway session nothing changed for this long is closed by the retention run (archived as a deleted session is: out of the tenant's CONTEXTD_MAX_SESSIONS_PER_TENANT count, kept for CONTEXTD_ARCHIVE_RETENTION); a client that comes back starts a new session from the history it sends (0: never)", false},
	{"CONTEXTD_GATEWAY_SERVER_KEYS", "false", "the gateway sends CONTEXTD_OPENAI_API_KEY / CONTEXTD_ANTHROPIC_API_KEY upstream for a client that sent no provider credentials (every caller the gateway admits then spends them; with API keys only at the doors, never on pass-through routes)", false},
	{"CONTEXTD_AUTH_EXEMPT_HEALTH", "true", "serve health and reflection without credentials", false},
	{"CONTEXTD_TLS_CERT_FILE", "", "TLS certificate (PEM); with CONTEXTD_TLS_KEY_FILE turns TLS on", false},
	{"CONTEXTD_TLS_KEY_FILE", "", "TLS private key (PEM)", false},
	{"CONTEXTD_TLS_CLIENT_CA_FILE", "", "CA (PEM) that client certificates must chain to; set: client certificates required", false},
	{"CONTEXTD_RATE_LIMIT_RPS", "100", "requests a second per tenant (0: no limit)", false},
	{"CONTEXTD_RATE_LIMIT_BURST", "200", "burst above the rate", false},
	{"CONTEXTD_MAX_COUNT_BYTES", "8388608", "what one request may cost to count, in bytes, on every RPC: its text, its tools as rendered for the model, and 256 bytes a message, 32 a part, 1024 a tool call", false},
	{"CONTEXTD_MAX_SESSIONS_PER_TENANT", "100000", "live sessions one tenant may hold", false},
	{"CONTEXTD_VIEW_CACHE_BYTES", "67108864", "memory for decoded active views kept between calls, in bytes (0: no cache)", false},
	{"CONTEXTD_GATEWAY_MEMO_BYTES", "67108864", "memory for the gateway's memo of the messages and tools lists clients resend, parsed, in bytes (dropped wholesale when full)", false},
	{"CONTEXTD_COUNT_BUDGET_BYTES", "16777216", "bytes of large requests tokenized at once, server-wide (as much again may wait; more is refused)", false},
	{"CONTEXTD_COUNT_LARGE_BYTES", "262144", "requests with at least this many bytes of text take their size from the count budget; smaller ones never wait", false},
	{"CONTEXTD_MAX_RESPONSE_BYTES", "4194304", "a page of ListSessions, GetMessages or ListCompactions ends at this many bytes (or its page_size, whichever comes first), an ExpandMessage response too (next_page_token continues), so responses fit clients' default 4 MB receive limit", false},
	{"CONTEXTD_MAX_VIEW_BYTES", "33554432", "an append that would make a session's active view larger than this many bytes is refused (FailedPrecondition: compact or clear it first; 0: no bound)", false},
	{"CONTEXTD_MAX_VIEW_WINDOWS", "4", "an append that would make a session's active view more than this many times its model's context window in tokens is refused likewise (0: no bound)", false},
	{"CONTEXTD_MAX_VIEW_MESSAGES", "100000", "an append that would make a session's active view longer than this many messages is refused (ResourceExhausted: compact or clear it first; 0: no bound)", false},
	{"CONTEXTD_MAX_LOG_BYTES_PER_TENANT", "10737418240", "bytes of stored messages (every session's log, summaries and placeholders, until retention purges them) one tenant may hold; an append past it is refused (ResourceExhausted; 0: no quota)", false},
	{"CONTEXTD_EXPAND_MAX_ROUNDS", "3", "contextd_expand calls one model turn may make (rounds of calls, through the gateway or ExpandToolCall); past them the tool answers that the model should answer with what it has", false},
	{"CONTEXTD_EXPAND_TOOL_BYTES", "16384", "bytes of original text one contextd_expand answer carries at the most (plus a note line of at most 1024 bytes saying how to read on); at most CONTEXTD_MAX_RESPONSE_BYTES minus 4096", false},
	{"CONTEXTD_MAX_CONCURRENT_STREAMS", "256", "calls one client connection may have open at once (HTTP/2 MaxConcurrentStreams)", false},
	{"CONTEXTD_MAX_CONNECTION_AGE", "30m", "close client connections after this long so load rebalances across replicas (0: never)", false},
	{"CONTEXTD_CORS_ALLOWED_ORIGINS", "", "comma-separated browser origins allowed to call the API cross-origin (Connect, gRPC-Web), or *; empty: same origin only", false},
	{"CONTEXTD_ALLOWED_HOSTS", "", "without authentication, the Host names served besides localhost, 127.0.0.1, [::1] and the listen host (comma-separated, or *), so a web page that rebinds its name to this server is refused; ignored with API keys", false},
	{"CONTEXTD_HTTP_IDLE_TIMEOUT", "2m", "close a client connection with no call open for this long", false},
	{"CONTEXTD_BACKGROUND_COMPACTION", "true", "prepare the compactions of sessions that summarize with an LLM in background jobs once they reach their warning level, so PrepareContext does not wait for the LLM (docs/compaction.md)", false},
	{"CONTEXTD_COMPACTION_WORKERS", "8", "background compaction jobs this server runs at once (they mostly wait on the LLM; 0: none here, other replicas run them)", false},
	{"CONTEXTD_COMPACTION_LEASE", "30s", "how long a worker holds a job without renewing it; a crashed server's jobs are taken again once it lapses", false},
	{"CONTEXTD_COMPACTION_QUEUE", "1000", "background jobs queued or running in the store at most; a session past it compacts in the call", false},
	{"CONTEXTD_COMPACTION_QUEUE_PER_TENANT", "50", "background jobs one tenant may have queued or running", false},
	{"CONTEXTD_COMPACTION_RUNNING_PER_TENANT", "4", "background jobs of one tenant running at once over all replicas (fairness: the tenants with the fewest running go first)", false},
	{"CONTEXTD_RETENTION_INTERVAL", "1h", "how often the retention purge runs (0: never)", false},
	{"CONTEXTD_ARCHIVE_RETENTION", "720h", "how long replaced originals and deleted sessions are kept (at least the revert window)", false},
}

func flagName(env string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "CONTEXTD_")), "_", "-")
}

// ParseConfig reads the environment, then the flags in args. A variable
// that is set, even to "", overrides the default (CONTEXTD_METRICS_ADDR=""
// disables metrics).
func ParseConfig(args []string, lookupEnv func(string) (string, bool)) (Config, error) {
	fs := flag.NewFlagSet("contextd", flag.ContinueOnError)
	// --help is WriteHelp's (the caller prints it on flag.ErrHelp); a bad
	// flag is the returned error.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	values := make(map[string]*string, len(settings))
	for _, s := range settings {
		def := s.def
		if v, ok := lookupEnv(s.env); ok && !s.secret {
			def = v
		}
		values[s.env] = fs.String(flagName(s.env), def, s.usage+" (env "+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	for _, s := range settings { // secrets: the flag if given, else the environment
		if v, ok := lookupEnv(s.env); s.secret && ok && *values[s.env] == "" {
			*values[s.env] = v
		}
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	get := func(env string) string { return *values[env] }
	cfg := Config{
		ListenAddr:    get("CONTEXTD_LISTEN_ADDR"),
		MetricsAddr:   get("CONTEXTD_METRICS_ADDR"),
		ModelsFile:    get("CONTEXTD_MODELS_FILE"),
		TokenizersDir: get("CONTEXTD_TOKENIZERS_DIR"),
		DatabaseURL:   get("CONTEXTD_DATABASE_URL"),
		DataDir:       get("CONTEXTD_DATA_DIR"),
	}
	if cfg.Pprof = get("CONTEXTD_PPROF"); !slices.Contains(pprofModes, cfg.Pprof) {
		return Config{}, fmt.Errorf("CONTEXTD_PPROF: want loopback, on or off, got %q", cfg.Pprof)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(get("CONTEXTD_LOG_LEVEL"))); err != nil {
		return Config{}, fmt.Errorf("CONTEXTD_LOG_LEVEL: %w", err)
	}
	n, err := strconv.Atoi(get("CONTEXTD_MAX_MESSAGE_BYTES"))
	if err != nil || n < 1024 {
		return Config{}, fmt.Errorf("CONTEXTD_MAX_MESSAGE_BYTES: want an integer of at least 1024, got %q", get("CONTEXTD_MAX_MESSAGE_BYTES"))
	}
	cfg.MaxMessageBytes = n
	if cfg.ShutdownTimeout, err = time.ParseDuration(get("CONTEXTD_SHUTDOWN_TIMEOUT")); err != nil || cfg.ShutdownTimeout <= 0 {
		return Config{}, fmt.Errorf("CONTEXTD_SHUTDOWN_TIMEOUT: want a positive duration such as 10s, got %q", get("CONTEXTD_SHUTDOWN_TIMEOUT"))
	}
	if cfg.WatchMaxSubs, err = strconv.Atoi(get("CONTEXTD_WATCH_MAX_SUBSCRIBERS")); err != nil || cfg.WatchMaxSubs < 1 {
		return Config{}, fmt.Errorf("CONTEXTD_WATCH_MAX_SUBSCRIBERS: want a positive integer, got %q", get("CONTEXTD_WATCH_MAX_SUBSCRIBERS"))
	}
	if cfg.WatchMaxSubsPerTenant, err = strconv.Atoi(get("CONTEXTD_WATCH_MAX_SUBSCRIBERS_PER_TENANT")); err != nil || cfg.WatchMaxSubsPerTenant < 0 {
		return Config{}, fmt.Errorf("CONTEXTD_WATCH_MAX_SUBSCRIBERS_PER_TENANT: want an integer of at least 0, got %q", get("CONTEXTD_WATCH_MAX_SUBSCRIBERS_PER_TENANT"))
	}
	if cfg.WatchMaxSubsPerTenant == 0 {
		cfg.WatchMaxSubsPerTenant = max(1, cfg.WatchMaxSubs/4)
	}
	if cfg.RevertWindow, err = time.ParseDuration(get("CONTEXTD_REVERT_WINDOW")); err != nil || cfg.RevertWindow <= 0 {
		return Config{}, fmt.Errorf("CONTEXTD_REVERT_WINDOW: want a positive duration such as 24h, got %q", get("CONTEXTD_REVERT_WINDOW"))
	}
	cfg.Summarizer = get("CONTEXTD_SUMMARIZER")
	for _, spec := range strings.Split(get("CONTEXTD_SUMMARIZERS_ALLOWED"), ",") {
		if spec = strings.TrimSpace(spec); spec != "" {
			if p, m, ok := strings.Cut(spec, ":"); !ok || p == "" || m == "" {
				return Config{}, fmt.Errorf("CONTEXTD_SUMMARIZERS_ALLOWED: want PROVIDER:MODEL or PROVIDER:* entries, got %q", spec)
			}
			cfg.SummarizersAllowed = append(cfg.SummarizersAllowed, spec)
		}
	}
	if cfg.SummarizerTimeout, err = time.ParseDuration(get("CONTEXTD_SUMMARIZER_TIMEOUT")); err != nil || cfg.SummarizerTimeout <= 0 {
		return Config{}, fmt.Errorf("CONTEXTD_SUMMARIZER_TIMEOUT: want a positive duration such as 20s, got %q", get("CONTEXTD_SUMMARIZER_TIMEOUT"))
	}
	if cfg.SummarizerMaxRetries, err = strconv.Atoi(get("CONTEXTD_SUMMARIZER_MAX_RETRIES")); err != nil || cfg.SummarizerMaxRetries < 0 || cfg.SummarizerMaxRetries > 5 {
		return Config{}, fmt.Errorf("CONTEXTD_SUMMARIZER_MAX_RETRIES: want 0 to 5, got %q", get("CONTEXTD_SUMMARIZER_MAX_RETRIES"))
	}
	cfg.OpenAIBaseURL, cfg.AnthropicBaseURL = get("CONTEXTD_OPENAI_BASE_URL"), get("CONTEXTD_ANTHROPIC_BASE_URL")
	if cfg.OpenAIAPIKey, err = secret(get("CONTEXTD_OPENAI_API_KEY"), get("CONTEXTD_OPENAI_API_KEY_FILE")); err != nil {
		return Config{}, fmt.Errorf("CONTEXTD_OPENAI_API_KEY_FILE: %w", err)
	}
	if cfg.AnthropicAPIKey, err = secret(get("CONTEXTD_ANTHROPIC_API_KEY"), get("CONTEXTD_ANTHROPIC_API_KEY_FILE")); err != nil {
		return Config{}, fmt.Errorf("CONTEXTD_ANTHROPIC_API_KEY_FILE: %w", err)
	}
	if cfg.AnthropicCountTokens, err = strconv.ParseBool(get("CONTEXTD_ANTHROPIC_COUNT_TOKENS")); err != nil {
		return Config{}, fmt.Errorf("CONTEXTD_ANTHROPIC_COUNT_TOKENS: want true or false, got %q", get("CONTEXTD_ANTHROPIC_COUNT_TOKENS"))
	}
	cfg.APIKeysFile = get("CONTEXTD_API_KEYS_FILE")
	switch cfg.Auth = get("CONTEXTD_AUTH"); cfg.Auth {
	case "auto", "on", "off":
	default:
		return Config{}, fmt.Errorf("CONTEXTD_AUTH: want auto, on or off, got %q", cfg.Auth)
	}
	if cfg.KeysReloadInterval, err = time.ParseDuration(get("CONTEXTD_API_KEYS_RELOAD")); err != nil || cfg.KeysReloadInterval <= 0 {
		return Config{}, fmt.Errorf("CONTEXTD_API_KEYS_RELOAD: want a positive duration such as 2s, got %q", get("CONTEXTD_API_KEYS_RELOAD"))
	}
	if v := get("CONTEXTD_API_KEYS"); v != "" {
		cfg.APIKeys = strings.Split(v, ",")
	}
	if cfg.UI, err = strconv.ParseBool(get("CONTEXTD_UI")); err != nil {
		return Config{}, fmt.Errorf("CONTEXTD_UI: want true or false")
	}
	if cfg.Gateway, err = strconv.ParseBool(get("CONTEXTD_GATEWAY")); err != nil {
		return Config{}, fmt.Errorf("CONTEXTD_GATEWAY: want true or false")
	}
	if cfg.GatewayServerKeys, err = strconv.ParseBool(get("CONTEXTD_GATEWAY_SERVER_KEYS")); err != nil {
		return Config{}, fmt.Errorf("CONTEXTD_GATEWAY_SERVER_KEYS: want true or false")
	}
	if cfg.GatewayKeepalive, err = time.ParseDuration(get("CONTEXTD_GATEWAY_KEEPALIVE")); err != nil || cfg.GatewayKeepalive < 0 {
		return Config{}, fmt.Errorf("CONTEXTD_GATEWAY_KEEPALIVE: want a duration such as 10s (0: off), got %q", get("CONTEXTD_GATEWAY_KEEPALIVE"))
	}
	if cfg.GatewaySessionTTL, err = time.ParseDuration(get("CONTEXTD_GATEWAY_SESSION_TTL")); err != nil || cfg.GatewaySessionTTL < 0 {
		return Config{}, fmt.Errorf("CONTEXTD_GATEWAY_SESSION_TTL: want a duration such as 168h (0: never), got %q", get("CONTEXTD_GATEWAY_SESSION_TTL"))
	}
	if cfg.StreamWriteTimeout, err = time.ParseDuration(get("CONTEXTD_STREAM_WRITE_TIMEOUT")); err != nil || cfg.StreamWriteTimeout < 0 {
		return Config{}, fmt.Errorf("CONTEXTD_STREAM_WRITE_TIMEOUT: want a duration such as 30s (0: no deadline), got %q", get("CONTEXTD_STREAM_WRITE_TIMEOUT"))
	}
	if cfg.AuthExemptHealth, err = strconv.ParseBool(get("CONTEXTD_AUTH_EXEMPT_HEALTH")); err != nil {
		return Config{}, fmt.Errorf("CONTEXTD_AUTH_EXEMPT_HEALTH: want true or false")
	}
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = get("CONTEXTD_TLS_CERT_FILE"), get("CONTEXTD_TLS_KEY_FILE"), get("CONTEXTD_TLS_CLIENT_CA_FILE")
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") || (cfg.TLSClientCAFile != "" && cfg.TLSCertFile == "") {
		return Config{}, fmt.Errorf("CONTEXTD_TLS_CERT_FILE and CONTEXTD_TLS_KEY_FILE go together (and client CAs need them)")
	}
	if cfg.RateLimitRPS, err = strconv.ParseFloat(get("CONTEXTD_RATE_LIMIT_RPS"), 64); err != nil || cfg.RateLimitRPS < 0 {
		return Config{}, fmt.Errorf("CONTEXTD_RATE_LIMIT_RPS: want a number of at least 0, got %q", get("CONTEXTD_RATE_LIMIT_RPS"))
	}
	for _, f := range []struct {
		env string
		dst *int
		min int
	}{{"CONTEXTD_RATE_LIMIT_BURST", &cfg.RateLimitBurst, 1}, {"CONTEXTD_MAX_COUNT_BYTES", &cfg.MaxCountBytes, 1},
		{"CONTEXTD_MAX_SESSIONS_PER_TENANT", &cfg.MaxSessionsPerTenant, 1}, {"CONTEXTD_COUNT_BUDGET_BYTES", &cfg.CountBudgetBytes, 1},
		{"CONTEXTD_COUNT_LARGE_BYTES", &cfg.LargeCountBytes, 1}, {"CONTEXTD_MAX_CONCURRENT_STREAMS", &cfg.MaxConcurrentStreams, 1},
		{"CONTEXTD_MAX_RESPONSE_BYTES", &cfg.MaxResponseBytes, 65536},
		{"CONTEXTD_VIEW_CACHE_BYTES", &cfg.ViewCacheBytes, 0}, {"CONTEXTD_GATEWAY_MEMO_BYTES", &cfg.GatewayMemoBytes, 1},
		{"CONTEXTD_MAX_VIEW_BYTES", &cfg.MaxViewBytes, 0}, {"CONTEXTD_MAX_VIEW_WINDOWS", &cfg.MaxViewWindows, 0},
		{"CONTEXTD_MAX_VIEW_MESSAGES", &cfg.MaxViewMessages, 0}, {"CONTEXTD_MAX_LOG_BYTES_PER_TENANT", &cfg.MaxLogBytesPerTenant, 0},
		{"CONTEXTD_COMPACTION_WORKERS", &cfg.Background.Workers, 0}, {"CONTEXTD_COMPACTION_QUEUE", &cfg.Background.Queue, 1},
		{"CONTEXTD_COMPACTION_QUEUE_PER_TENANT", &cfg.Background.PerTenant, 1},
		{"CONTEXTD_COMPACTION_RUNNING_PER_TENANT", &cfg.Background.Running, 1},
		{"CONTEXTD_EXPAND_MAX_ROUNDS", &cfg.ExpandMaxRounds, 1}, {"CONTEXTD_EXPAND_TOOL_BYTES", &cfg.ExpandToolBytes, 256}} {
		if *f.dst, err = strconv.Atoi(get(f.env)); err != nil || *f.dst < f.min {
			return Config{}, fmt.Errorf("%s: want an integer of at least %d, got %q", f.env, f.min, get(f.env))
		}
	}
	if most := cfg.MaxResponseBytes - engine.ExpandAnswerMarginBytes; cfg.ExpandToolBytes > most {
		return Config{}, fmt.Errorf("CONTEXTD_EXPAND_TOOL_BYTES (%d) must be at most CONTEXTD_MAX_RESPONSE_BYTES (%d) minus %d (the answer's note line and framing), %d, so an answer fits a response",
			cfg.ExpandToolBytes, cfg.MaxResponseBytes, engine.ExpandAnswerMarginBytes, most)
	}
	if cfg.CountBudgetBytes < cfg.MaxCountBytes {
		return Config{}, fmt.Errorf("CONTEXTD_COUNT_BUDGET_BYTES (%d) must be at least CONTEXTD_MAX_COUNT_BYTES (%d), or the largest request could never run", cfg.CountBudgetBytes, cfg.MaxCountBytes)
	}
	if cfg.Background.Enabled, err = strconv.ParseBool(get("CONTEXTD_BACKGROUND_COMPACTION")); err != nil {
		return Config{}, fmt.Errorf("CONTEXTD_BACKGROUND_COMPACTION: want true or false")
	}
	if cfg.Background.Lease, err = time.ParseDuration(get("CONTEXTD_COMPACTION_LEASE")); err != nil || cfg.Background.Lease < time.Second {
		return Config{}, fmt.Errorf("CONTEXTD_COMPACTION_LEASE: want a duration of at least 1s, got %q", get("CONTEXTD_COMPACTION_LEASE"))
	}
	if cfg.RetentionInterval, err = time.ParseDuration(get("CONTEXTD_RETENTION_INTERVAL")); err != nil || cfg.RetentionInterval < 0 {
		return Config{}, fmt.Errorf("CONTEXTD_RETENTION_INTERVAL: want a duration such as 1h, got %q", get("CONTEXTD_RETENTION_INTERVAL"))
	}
	if cfg.ArchiveRetention, err = time.ParseDuration(get("CONTEXTD_ARCHIVE_RETENTION")); err != nil || cfg.ArchiveRetention < cfg.RevertWindow {
		return Config{}, fmt.Errorf("CONTEXTD_ARCHIVE_RETENTION: want a duration of at least the revert window (%s), got %q", cfg.RevertWindow, get("CONTEXTD_ARCHIVE_RETENTION"))
	}
	if cfg.MaxConnectionAge, err = time.ParseDuration(get("CONTEXTD_MAX_CONNECTION_AGE")); err != nil || cfg.MaxConnectionAge < 0 {
		return Config{}, fmt.Errorf("CONTEXTD_MAX_CONNECTION_AGE: want a duration such as 30m, got %q", get("CONTEXTD_MAX_CONNECTION_AGE"))
	}
	for _, o := range strings.Split(get("CONTEXTD_CORS_ALLOWED_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.CORSAllowedOrigins = append(cfg.CORSAllowedOrigins, o)
		}
	}
	for _, h := range strings.Split(get("CONTEXTD_ALLOWED_HOSTS"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.AllowedHosts = append(cfg.AllowedHosts, h)
		}
	}
	if cfg.HTTPIdleTimeout, err = time.ParseDuration(get("CONTEXTD_HTTP_IDLE_TIMEOUT")); err != nil || cfg.HTTPIdleTimeout <= 0 {
		return Config{}, fmt.Errorf("CONTEXTD_HTTP_IDLE_TIMEOUT: want a positive duration such as 2m, got %q", get("CONTEXTD_HTTP_IDLE_TIMEOUT"))
	}
	return cfg, nil
}

// secret returns value, or the trimmed content of file when value is empty.
func secret(value, file string) (string, error) {
	if value != "" || file == "" {
		return value, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err // the path, never the content
	}
	return strings.TrimSpace(string(b)), nil
}

// LookupEnv is os.LookupEnv, for ParseConfig.
func LookupEnv(key string) (string, bool) { return os.LookupEnv(key) }
