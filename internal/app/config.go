package app

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is the server configuration. Every field comes from an environment
// variable and may be overridden by the flag of the same name (CONTEXTD_LISTEN_ADDR
// ↔ --listen-addr).
type Config struct {
	ListenAddr      string
	MetricsAddr     string
	LogLevel        slog.Level
	ModelsFile      string
	DatabaseURL     string
	DataDir         string
	MaxMessageBytes int
	ShutdownTimeout time.Duration
	RevertWindow    time.Duration
	WatchMaxSubs    int
}

// envFlag describes one setting.
type envFlag struct {
	env, def, usage string
}

var settings = []envFlag{
	{"CONTEXTD_LISTEN_ADDR", ":50051", "gRPC listen address"},
	{"CONTEXTD_METRICS_ADDR", ":9090", "Prometheus metrics HTTP address (/metrics); empty disables"},
	{"CONTEXTD_LOG_LEVEL", "info", "log level: debug, info, warn, error"},
	{"CONTEXTD_MODELS_FILE", "", "JSON file of model registry overrides"},
	{"CONTEXTD_DATABASE_URL", "", "PostgreSQL URL; empty means embedded SQLite in CONTEXTD_DATA_DIR"},
	{"CONTEXTD_DATA_DIR", "./data", "directory of the embedded SQLite database"},
	{"CONTEXTD_MAX_MESSAGE_BYTES", "16777216", "largest request message accepted, in bytes"},
	{"CONTEXTD_SHUTDOWN_TIMEOUT", "10s", "how long a graceful stop may take before open calls are cut"},
	{"CONTEXTD_REVERT_WINDOW", "24h", "how long a compaction can be reverted"},
	{"CONTEXTD_WATCH_MAX_SUBSCRIBERS", "10000", "most WatchContextStatus streams one server holds"},
}

func flagName(env string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "CONTEXTD_")), "_", "-")
}

// ParseConfig reads the environment, then the flags in args. A variable
// that is set, even to "", overrides the default (CONTEXTD_METRICS_ADDR=""
// disables metrics).
func ParseConfig(args []string, lookupEnv func(string) (string, bool)) (Config, error) {
	fs := flag.NewFlagSet("contextd", flag.ContinueOnError)
	values := make(map[string]*string, len(settings))
	for _, s := range settings {
		def := s.def
		if v, ok := lookupEnv(s.env); ok {
			def = v
		}
		values[s.env] = fs.String(flagName(s.env), def, s.usage+" (env "+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	get := func(env string) string { return *values[env] }
	cfg := Config{
		ListenAddr:  get("CONTEXTD_LISTEN_ADDR"),
		MetricsAddr: get("CONTEXTD_METRICS_ADDR"),
		ModelsFile:  get("CONTEXTD_MODELS_FILE"),
		DatabaseURL: get("CONTEXTD_DATABASE_URL"),
		DataDir:     get("CONTEXTD_DATA_DIR"),
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
	if cfg.RevertWindow, err = time.ParseDuration(get("CONTEXTD_REVERT_WINDOW")); err != nil || cfg.RevertWindow <= 0 {
		return Config{}, fmt.Errorf("CONTEXTD_REVERT_WINDOW: want a positive duration such as 24h, got %q", get("CONTEXTD_REVERT_WINDOW"))
	}
	return cfg, nil
}

// LookupEnv is os.LookupEnv, for ParseConfig.
func LookupEnv(key string) (string, bool) { return os.LookupEnv(key) }
