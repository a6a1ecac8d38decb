package engine_test

import (
	"fmt"
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
	var s store.Store
	if backend == "postgres" {
		s, err = postgres.Open(b.Context(), pgtest.URL(b))
	} else {
		s, err = sqlite.Open(b.Context(), b.TempDir())
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return engine.New(tokens.NewEncodings(), models, s)
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
