package engine_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/tokens"
)

func benchEngine(b *testing.B, backend string) *engine.Engine {
	b.Helper()
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		b.Fatal(err)
	}
	return engine.New(tokens.NewEncodings(), models, benchStore(b, backend))
}

// benchStore opens a fresh store of backend, closed when b ends.
func benchStore(b *testing.B, backend string) store.Store {
	b.Helper()
	var s store.Store
	var err error
	if backend == "postgres" {
		s, err = postgres.Open(b.Context(), pgtest.URL(b))
	} else {
		s, err = sqlite.Open(b.Context(), b.TempDir())
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkSessionUsage reads GetContextUsage of a stored session: one row,
// no scan of the history, so 2,000 messages cost what 10 do.
func BenchmarkSessionUsage(b *testing.B) {
	for _, backend := range []string{"postgres", "sqlite"} {
		for _, n := range []int{10, 2000} {
			b.Run(fmt.Sprintf("%s/messages=%d", backend, n), func(b *testing.B) {
				e := benchEngine(b, backend)
				ctx := b.Context()
				v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o", System: "You are a coding agent."})
				if err != nil {
					b.Fatal(err)
				}
				for done := 0; done < n; done += 100 {
					batch := make([]chat.Message, min(100, n-done))
					for i := range batch {
						batch[i] = userMsg(fmt.Sprintf("message %d with some text to count", done+i))
					}
					if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: batch}); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for b.Loop() {
					u, err := e.SessionUsage(ctx, tenant, v.ID)
					if err != nil || u.MessageCount != int64(n) {
						b.Fatalf("%+v, %v", u, err)
					}
				}
			})
		}
	}
}

// BenchmarkAppendParallel appends one message per call from 16 concurrent
// clients, each on its own session.
func BenchmarkAppendParallel(b *testing.B) {
	for _, backend := range []string{"postgres", "sqlite"} {
		b.Run(backend+"/clients=16", func(b *testing.B) {
			e := benchEngine(b, backend)
			ctx := b.Context()
			ids := make([]string, 16)
			for i := range ids {
				v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o"})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = v.ID
			}
			var next atomic.Int64
			b.SetParallelism(8) // 8 × GOMAXPROCS(2) = 16 goroutines
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := ids[int(next.Add(1)-1)%len(ids)]
				msg := []chat.Message{userMsg("Run the tests again and show me the failures, please.")}
				for pb.Next() {
					if _, err := e.AppendMessages(ctx, tenant, id, engine.AppendInput{Messages: msg}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// BenchmarkCompact compacts a session of about 200,000 tokens (600 agent
// messages) with prune and the extractive summary, then reverts it (not
// timed) so every iteration compacts the same session.
func BenchmarkCompact(b *testing.B) {
	for _, backend := range []string{"postgres", "sqlite"} {
		b.Run(backend+"/tokens=200k", func(b *testing.B) {
			e := benchEngine(b, backend)
			ctx := b.Context()
			v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4.1", System: "You are a coding agent."})
			if err != nil {
				b.Fatal(err)
			}
			msgs := []chat.Message{userMsg("Fix the failing tests in src/ and keep the API stable.")}
			for i := 0; i < 300; i++ {
				id := fmt.Sprintf("call_%d", i)
				out := fmt.Sprintf("$ pytest tests/test_mod%d.py\n%s", i, strings.Repeat(fmt.Sprintf("tests/test_mod%d.py::test_case FAILED AssertionError: expected %d\n", i, i), 40))
				msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{
					{Type: chat.PartText, Text: fmt.Sprintf("I'll run the tests for module %d next.", i)},
					{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: id, Name: "bash", Arguments: fmt.Sprintf(`{"command":"pytest tests/test_mod%d.py"}`, i)}}}},
					resultMsg(id, out))
			}
			if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
				b.Fatal(err)
			}
			s, _ := e.GetSession(ctx, tenant, v.ID)
			target := 0.05
			b.ResetTimer()
			for b.Loop() {
				res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Target: &target})
				if err != nil || !res.Compacted {
					b.Fatalf("%+v, %v", res, err)
				}
				b.StopTimer()
				if _, err := e.RevertCompaction(ctx, tenant, v.ID, res.Compaction.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(s.ActiveTokens), "session-tokens")
			b.ReportMetric(float64(s.ActiveCount), "messages")
		})
	}
}
