package engine_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/summarize"
)

// leakyLLM fails the way real providers do: an error body full of things a
// tenant must not see (an internal URL, an organization id, a request id).
type leakyLLM struct{ status int }

const leak = `{"error":{"message":"Project proj_SECRET42 in organization org-SECRET7 exceeded quota; see https://internal.example/billing?acct=9 (request req_abc123)","type":"insufficient_quota"}}`

func (l leakyLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_abc123")
	w.WriteHeader(l.status)
	_, _ = w.Write([]byte(leak))
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func spendEngine(t *testing.T, url string, allowed []string, opts ...engine.Option) *engine.Engine {
	t.Helper()
	models, encodings := testModels(t)
	ep := summarize.Endpoint{APIKey: "test-key", Timeout: 2 * time.Second}
	openaiEP, anthropicEP := ep, ep
	openaiEP.BaseURL, anthropicEP.BaseURL = url+"/v1/", url
	set, err := summarize.NewSet("extractive", map[string]summarize.Endpoint{
		summarize.ProviderOpenAI: openaiEP, summarize.ProviderAnthropic: anthropicEP})
	if err != nil {
		t.Fatal(err)
	}
	set.Allow(allowed)
	return engine.New(encodings, models, openSQLite(t), append([]engine.Option{engine.WithSummarizers(set)}, opts...)...)
}

// TestSummarizerAllowList: a session may name only the summarizers the
// server allows (the default, extractive, and the configured list, where
// "PROVIDER:*" allows a provider's every model); others are InvalidArgument
// on policy.summarizer and nothing is created.
func TestSummarizerAllowList(t *testing.T) {
	srv := httptest.NewServer(&fakeLLM{mode: "ok"})
	defer srv.Close()
	e := spendEngine(t, srv.URL, []string{"openai:gpt-4o-mini", "anthropic:*"})
	for spec, ok := range map[string]bool{
		"extractive": true, "openai:gpt-4o-mini": true, "anthropic:claude-haiku-4-5": true, "anthropic:claude-opus-4-1": true,
		"openai:gpt-4.5-preview": false, "openai:*": false, "ollama:llama3": false,
	} {
		t.Run(spec, func(t *testing.T) {
			_, err := e.CreateSession(t.Context(), tenant, engine.NewSession{Model: "gpt-4o", Policy: compaction.Overrides{Summarizer: &spec}})
			var invalid *chat.InvalidError
			switch {
			case ok && err != nil:
				t.Errorf("refused: %v", err)
			case !ok && (!errors.As(err, &invalid) || invalid.Violations[0].Field != "policy.summarizer" || !strings.Contains(err.Error(), "allowed: extractive")):
				t.Errorf("got %v; want InvalidArgument on policy.summarizer listing what is allowed", err)
			}
		})
	}
}

// TestDryRunDoesNotCallTheLLM: a dry run plans with the extractive
// summarizer and says so, unless it asks for the LLM (dry_run_llm).
func TestDryRunDoesNotCallTheLLM(t *testing.T) {
	fake := &fakeLLM{mode: "ok"}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	e := spendEngine(t, srv.URL, []string{"openai:gpt-4o-mini"})
	spec, keep := "openai:gpt-4o-mini", 1000
	v := agentSession(t, e, compaction.Overrides{Summarizer: &spec, ProtectRecentToolResults: &keep}, 20)
	res, err := e.Compact(t.Context(), tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := fake.requests.Load(); n != 0 || !strings.Contains(strings.Join(res.Warnings, " "), "dry_run_llm") || res.Compaction == nil ||
		strings.Contains(res.Compaction.Summary, "see above") {
		t.Fatalf("a plain dry run made %d LLM calls; warnings %v", n, res.Warnings)
	}
	res, err = e.Compact(t.Context(), tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, DryRun: true, DryRunLLM: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := fake.requests.Load(); n != 1 || res.Compaction == nil || !fromLLM(res.Compaction.Summary) || res.Compacted {
		t.Fatalf("dry_run_llm: %d LLM calls, compacted %v", n, res.Compacted)
	}
}

// TestProviderErrorsReachTenantsClean: a provider's error text (ids, URLs,
// raw bodies) is logged in full, while the tenant's warning says only what
// kind of failure it was.
func TestProviderErrorsReachTenantsClean(t *testing.T) {
	for _, spec := range []string{"openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"} {
		for _, status := range []int{http.StatusTooManyRequests, http.StatusForbidden} {
			t.Run(spec+"/"+http.StatusText(status), func(t *testing.T) {
				srv := httptest.NewServer(leakyLLM{status: status})
				defer srv.Close()
				logs := &syncBuffer{}
				e := spendEngine(t, srv.URL, []string{spec}, engine.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
				keep := 1000
				v := agentSession(t, e, compaction.Overrides{Summarizer: &spec, ProtectRecentToolResults: &keep}, 20)
				res, err := e.Compact(t.Context(), tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize})
				if err != nil {
					t.Fatal(err)
				}
				warnings := strings.Join(res.Warnings, "\n")
				want := "LLM summarizer failed (the summarizer's provider answered HTTP " + strconv.Itoa(status) + ")"
				if !strings.Contains(warnings, want) {
					t.Errorf("warnings %q; want %q", warnings, want)
				}
				for _, secret := range []string{"SECRET", "internal.example", "req_abc123", "quota", "http://", "127.0.0.1"} {
					if strings.Contains(warnings, secret) {
						t.Errorf("the tenant's warning leaks %q: %s", secret, warnings)
					}
				}
				if !strings.Contains(logs.String(), "org-SECRET7") {
					t.Errorf("the log lacks the provider's error: %s", logs.String())
				}
			})
		}
	}
}
