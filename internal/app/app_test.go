package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	pvalidate "buf.build/go/protovalidate"
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/engine"
)

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// startServer runs the real server (app.Run) on a loopback port and returns
// a client connection; the server stops when the test ends.
func startServer(t testing.TB, env map[string]string) *grpc.ClientConn {
	t.Helper()
	return startServerLog(t, env, io.Discard)
}

// startServerLog is startServer with the server's JSON log written to logw.
func startServerLog(t testing.TB, env map[string]string, logw io.Writer) *grpc.ClientConn {
	t.Helper()
	addr := freeAddr(t)
	env["CONTEXTD_LISTEN_ADDR"] = addr
	if _, ok := env["CONTEXTD_DATA_DIR"]; !ok {
		env["CONTEXTD_DATA_DIR"] = t.TempDir()
	}
	for k, v := range map[string]string{"CONTEXTD_METRICS_ADDR": "", "CONTEXTD_RATE_LIMIT_RPS": "0"} {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	cfg, err := ParseConfig(nil, mapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.NewJSONHandler(logw, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	conn := dial(t, addr)
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "contextd.v1.ContextService"})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not become healthy: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fieldViolations(t *testing.T, err error) []string {
	t.Helper()
	st, _ := status.FromError(err)
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	return fields
}

func text(s string) *contextdv1.Part {
	return &contextdv1.Part{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: s}}}
}

func TestServer(t *testing.T) {
	conn := startServer(t, map[string]string{"CONTEXTD_MAX_MESSAGE_BYTES": "65536"})
	client := contextdv1.NewContextServiceClient(conn)
	ctx := t.Context()

	t.Run("empty text counts zero", func(t *testing.T) {
		for _, enc := range []string{"cl100k_base", "o200k_base"} {
			resp, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Encoding: enc})
			if err != nil || resp.GetTotalTokens() != 0 {
				t.Fatalf("%s: %v, %v", enc, resp, err)
			}
		}
	})
	t.Run("text count is exact", func(t *testing.T) {
		resp, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Encoding: "o200k_base", Text: "hello world"})
		if err != nil || resp.GetTotalTokens() != 2 || resp.GetEncoding() != "o200k_base" {
			t.Fatalf("%v, %v", resp, err)
		}
	})
	t.Run("chat request follows OpenAI's counting rule", func(t *testing.T) {
		// The example of OpenAI's cookbook "How to count tokens with
		// tiktoken": 129 prompt tokens for gpt-4 and gpt-3.5-turbo, 124 for
		// gpt-4o and gpt-4o-mini.
		msg := func(role contextdv1.Role, name, content string) *contextdv1.Message {
			return &contextdv1.Message{Role: role, Name: name, Parts: []*contextdv1.Part{text(content)}}
		}
		sys := contextdv1.Role_ROLE_SYSTEM
		msgs := []*contextdv1.Message{
			msg(sys, "", "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."),
			msg(sys, "example_user", "New synergies will help drive top-line growth."),
			msg(sys, "example_assistant", "Things working well together will increase revenue."),
			msg(sys, "example_user", "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."),
			msg(sys, "example_assistant", "Let's talk later when we're less busy about how to do better."),
			msg(contextdv1.Role_ROLE_USER, "", "This late pivot means we don't have time to boil the ocean for the client deliverable."),
		}
		for model, want := range map[string]int64{"gpt-4": 129, "gpt-3.5-turbo": 129, "gpt-4o": 124, "gpt-4o-mini-2024-07-18": 124} {
			resp, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Model: model, Messages: msgs})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetTotalTokens() != want {
				t.Errorf("%s: %d tokens, want %d", model, resp.GetTotalTokens(), want)
			}
			if len(resp.GetMessages()) != len(msgs) {
				t.Errorf("%s: %d message counts", model, len(resp.GetMessages()))
			}
		}
	})
	t.Run("unknown encoding names the field", func(t *testing.T) {
		_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Encoding: "p99k", Text: "x"})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(strings.Join(fieldViolations(t, err), ","), "encoding") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unknown model in CountTokens names the field", func(t *testing.T) {
		_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Model: "no-such-model", Text: "x"})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(strings.Join(fieldViolations(t, err), ","), "model") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("protovalidate rejects a message without role", func(t *testing.T) {
		_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{
			Encoding: "o200k_base", Messages: []*contextdv1.Message{{Parts: []*contextdv1.Part{text("x")}}},
		})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "messages[0].role") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("text and chat together are rejected", func(t *testing.T) {
		_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Text: "x", SystemPrompt: "y"})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("bad tool schema names the field", func(t *testing.T) {
		_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{
			Model: "gpt-4o", Tools: []*contextdv1.ToolDefinition{{Name: "f", ParametersJson: "[1,2"}},
		})
		if got := fieldViolations(t, err); status.Code(err) != codes.InvalidArgument || len(got) != 1 || got[0] != "tools[0].parameters_json" {
			t.Fatalf("got %v (%v)", err, got)
		}
	})
	t.Run("tool result outside a tool message is rejected", func(t *testing.T) {
		_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{
			Model: "gpt-4o", Messages: []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{
				{Kind: &contextdv1.Part_ToolResult{ToolResult: &contextdv1.ToolResultPart{ToolCallId: "c1", Content: "x"}}},
			}}},
		})
		if got := fieldViolations(t, err); status.Code(err) != codes.InvalidArgument || len(got) != 1 || got[0] != "messages[0].parts[0].tool_result" {
			t.Fatalf("got %v (%v)", err, got)
		}
	})
	t.Run("over-size request gets a clear error and the server keeps serving", func(t *testing.T) {
		_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Encoding: "cl100k_base", Text: strings.Repeat("a", 70_000)})
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
			t.Fatalf("got %v", err)
		}
		resp, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Encoding: "cl100k_base", Text: "still here"})
		if err != nil || resp.GetTotalTokens() != 2 {
			t.Fatalf("after the over-size request: %v, %v", resp, err)
		}
	})
	t.Run("ListModels has the required models", func(t *testing.T) {
		resp, err := client.ListModels(ctx, &contextdv1.ListModelsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]*contextdv1.ModelInfo{}
		for _, m := range resp.GetModels() {
			have[m.GetName()] = m
		}
		for _, n := range []string{"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-5", "gpt-5-mini", "o3", "o4-mini", "gpt-4",
			"gpt-3.5-turbo", "claude-3-5-sonnet", "claude-sonnet-4", "claude-sonnet-4-5", "claude-opus-4-1",
			"claude-haiku-4-5", "gemini-2.5-pro", "gemini-2.5-flash", "llama-3.3-70b", "mistral-large"} {
			if have[n] == nil {
				t.Errorf("model %s missing", n)
			}
		}
		if m := have["gpt-4o"]; m == nil || m.GetEncoding() != "o200k_base" || !m.GetExact() || m.GetContextWindow() != 128000 {
			t.Errorf("gpt-4o: %v", m)
		}
		if m := have["claude-sonnet-4-5"]; m == nil || m.GetExact() || m.GetExpectedError() == 0 {
			t.Errorf("claude-sonnet-4-5 must be approximate: %v", m)
		}
		if d := resp.GetDefaultModel(); d.GetContextWindow() != 128000 || d.GetEncoding() != "cl100k_base" || d.GetExact() {
			t.Errorf("default model: %v", d)
		}
	})
	t.Run("GetContextUsage breaks the window down", func(t *testing.T) {
		resp, err := client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_Inline{
			Inline: &contextdv1.InlineContext{
				Model: "gpt-4o", SystemPrompt: "You are terse.",
				Tools: []*contextdv1.ToolDefinition{{Name: "read_file", Description: "Read a file.",
					ParametersJson: `{"type":"object","properties":{"path":{"type":"string","description":"Path."}}}`}},
				Messages: []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{text("hello")}}},
			},
		}})
		if err != nil {
			t.Fatal(err)
		}
		u := resp.GetUsage()
		if !u.GetModelKnown() || u.GetContextWindow() != 128000 || u.GetReservedOutputTokens() != 19200 {
			t.Errorf("usage: %v", u)
		}
		if u.GetSystemTokens() <= 0 || u.GetToolsTokens() <= 0 || u.GetMessagesTokens() <= 0 {
			t.Errorf("breakdown: %v", u)
		}
		if u.GetUsedTokens() != u.GetSystemTokens()+u.GetToolsTokens()+u.GetMessagesTokens() ||
			u.GetFreeTokens() != 128000-19200-u.GetUsedTokens() {
			t.Errorf("sums: %v", u)
		}
		if u.GetLevel() != contextdv1.ContextLevel_CONTEXT_LEVEL_OK || u.GetWillCompact() || u.GetEstimateSource() != contextdv1.EstimateSource_ESTIMATE_SOURCE_ESTIMATED {
			t.Errorf("level: %v", u)
		}
	})
	t.Run("unknown model in GetContextUsage falls back and says so", func(t *testing.T) {
		resp, err := client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_Inline{
			Inline: &contextdv1.InlineContext{Model: "acme-7b"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		u := resp.GetUsage()
		if u.GetModelKnown() || u.GetContextWindow() != 128000 || u.GetEncoding() != "cl100k_base" || u.GetExact() || len(u.GetWarnings()) == 0 {
			t.Errorf("usage: %v", u)
		}
	})
	t.Run("levels follow a single-threshold policy", func(t *testing.T) {
		th := 0.65 // "summarize at 65 %": warning = critical
		for _, tc := range []struct {
			repeat int
			level  contextdv1.ContextLevel
			over   bool
		}{
			{repeat: 100, level: contextdv1.ContextLevel_CONTEXT_LEVEL_OK},
			{repeat: 1000, level: contextdv1.ContextLevel_CONTEXT_LEVEL_SUMMARIZE},
			{repeat: 1500, level: contextdv1.ContextLevel_CONTEXT_LEVEL_HANDOFF, over: true},
		} {
			big := strings.Repeat("lorem ipsum dolor sit amet ", tc.repeat) // 5 tokens a repeat
			resp, err := client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_Inline{
				Inline: &contextdv1.InlineContext{
					Model:    "gpt-4", // 8,192-token window, 1,228 reserved
					Messages: []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{text(big)}}},
					Policy:   &contextdv1.CompactionPolicy{WarningThreshold: &th, CriticalThreshold: &th},
				},
			}})
			if err != nil {
				t.Fatal(err)
			}
			u := resp.GetUsage()
			if u.GetLevel() != tc.level || u.GetWillCompact() != (tc.level != contextdv1.ContextLevel_CONTEXT_LEVEL_OK) {
				t.Errorf("%d repeats: %v", tc.repeat, u)
			}
			if tc.over != (u.GetOverTokens() > 0) || tc.over != strings.Contains(u.GetRecommendation(), "does not fit") {
				t.Errorf("%d repeats: over %d, recommendation %q", tc.repeat, u.GetOverTokens(), u.GetRecommendation())
			}
		}
	})
	t.Run("incoherent policy names the field", func(t *testing.T) {
		w := 0.9 // above the default critical threshold 0.85
		_, err := client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_Inline{
			Inline: &contextdv1.InlineContext{Model: "gpt-4o", Policy: &contextdv1.CompactionPolicy{WarningThreshold: &w}},
		}})
		if got := fieldViolations(t, err); status.Code(err) != codes.InvalidArgument || len(got) == 0 || got[0] != "inline.policy.critical_threshold" {
			t.Fatalf("got %v (%v)", err, got)
		}
	})
}

// panicking is a ContextService whose CountTokens panics.
type panicking struct {
	contextdv1.UnimplementedContextServiceServer
}

func (panicking) CountTokens(context.Context, *contextdv1.CountTokensRequest) (*contextdv1.CountTokensResponse, error) {
	panic("boom")
}

func TestPanicBecomesInternal(t *testing.T) {
	validator, err := pvalidate.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{MaxMessageBytes: 1 << 20}
	srv, err := newGRPCServer(cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)), validator, grpcprom.NewServerMetrics(), nil)
	if err != nil {
		t.Fatal(err)
	}
	contextdv1.RegisterContextServiceServer(srv, panicking{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	client := contextdv1.NewContextServiceClient(dial(t, lis.Addr().String()))
	for range 2 { // the second call proves the process survived the first
		_, err := client.CountTokens(t.Context(), &contextdv1.CountTokensRequest{Text: "x"})
		if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "boom") {
			t.Fatalf("got %v", err)
		}
	}
}

func TestGracefulStop(t *testing.T) {
	addr := freeAddr(t)
	cfg, err := ParseConfig([]string{"--listen-addr", addr, "--metrics-addr", "", "--data-dir", t.TempDir()}, mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil))) }()
	conn := dial(t, addr)
	health := healthpb.NewHealthClient(conn)
	watchCtx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	var stream healthpb.Health_WatchClient
	for deadline := time.Now().Add(10 * time.Second); ; {
		// The server may not be listening yet; retry until it says SERVING.
		s, err := health.Watch(watchCtx, &healthpb.HealthCheckRequest{})
		if err == nil {
			if first, err := s.Recv(); err == nil && first.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				stream = s
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("server never served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	// The watcher is told NOT_SERVING before the server stops.
	next, err := stream.Recv()
	if err != nil || next.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("after stop: %v, %v", next, err)
	}
	stopWatch() // a client that heard NOT_SERVING goes elsewhere
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestParseConfig(t *testing.T) {
	env := map[string]string{"CONTEXTD_LISTEN_ADDR": ":7000", "CONTEXTD_LOG_LEVEL": "debug"}
	cfg, err := ParseConfig([]string{"--listen-addr", ":7001"}, mapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != ":7001" || cfg.LogLevel != slog.LevelDebug || cfg.MaxMessageBytes != 16<<20 || cfg.MetricsAddr != "localhost:9090" {
		t.Errorf("config: %+v", cfg)
	}
	for _, bad := range [][]string{{"--max-message-bytes", "x"}, {"--log-level", "loud"}, {"--shutdown-timeout", "-1s"}, {"extra"}} {
		if _, err := ParseConfig(bad, mapEnv(nil)); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
	// A contextd_expand answer fits a response: the tool's bytes are held
	// to CONTEXTD_MAX_RESPONSE_BYTES minus the note's margin.
	most := 65536 - engine.ExpandAnswerMarginBytes
	for value, ok := range map[int]bool{most: true, most + 1: false, 1 << 30: false} {
		env := map[string]string{"CONTEXTD_MAX_RESPONSE_BYTES": "65536", "CONTEXTD_EXPAND_TOOL_BYTES": fmt.Sprint(value)}
		cfg, err := ParseConfig(nil, mapEnv(env))
		if ok && (err != nil || cfg.ExpandToolBytes != value) {
			t.Errorf("CONTEXTD_EXPAND_TOOL_BYTES=%d: %v", value, err)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), "CONTEXTD_EXPAND_TOOL_BYTES") || !strings.Contains(err.Error(), "CONTEXTD_MAX_RESPONSE_BYTES")) {
			t.Errorf("CONTEXTD_EXPAND_TOOL_BYTES=%d: %v; want a refusal naming both settings", value, err)
		}
	}
}

func mapEnv(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestSecretsStayOutOfHelp(t *testing.T) {
	keyFile := t.TempDir() + "/key"
	if err := os.WriteFile(keyFile, []byte("sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := mapEnv(map[string]string{"CONTEXTD_OPENAI_API_KEY": "sk-secret", "CONTEXTD_DATABASE_URL": "postgres://u:pw@db/x",
		"CONTEXTD_ANTHROPIC_API_KEY_FILE": keyFile})
	cfg, err := ParseConfig(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OpenAIAPIKey != "sk-secret" || cfg.AnthropicAPIKey != "sk-from-file" || cfg.DatabaseURL != "postgres://u:pw@db/x" {
		t.Errorf("secrets not read: %q %q %q", cfg.OpenAIAPIKey, cfg.AnthropicAPIKey, cfg.DatabaseURL)
	}
	if cfg, _ := ParseConfig([]string{"--openai-api-key", "sk-flag"}, env); cfg.OpenAIAPIKey != "sk-flag" {
		t.Errorf("the flag must win: %q", cfg.OpenAIAPIKey)
	}
	// --help prints every flag with its default; secrets must not appear.
	_, herr := ParseConfig([]string{"--help"}, env)
	var out strings.Builder
	WriteHelp(&out, env)
	help := out.String()
	if !errors.Is(herr, flag.ErrHelp) || strings.Contains(help, "sk-secret") || strings.Contains(help, "pw@db") || !strings.Contains(help, "openai-api-key") {
		t.Errorf("--help output leaks or lacks flags:\n%s", help)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }
