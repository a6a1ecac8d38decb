package gateway_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestConcurrentRetriesOfAnExtension: a request that extends a session,
// sent several times at once (a client's retries racing each other, or the
// same request on two replicas), appends its new message once and records
// one reply. Its append carries the version its history was matched at and
// no idempotency key: the requests that lost the race conflict, are
// matched again and find the message stored (docs/gateway.md). Without the
// version, each appended the message again.
func TestConcurrentRetriesOfAnExtension(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		history := []any{map[string]any{"role": "user", "content": "q0"}}
		s.fake.Script(gatewaytest.Reply{Text: "a0"})
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("first call: %d %s", resp.StatusCode, body)
		}
		session := resp.Header.Get("X-Contextd-Session")
		want := []string{"user: q0", "assistant: a0"}
		if got := s.waitLog(session, want); !slices.Equal(got, want) {
			t.Fatalf("log after the first call:\n got %q\nwant %q", got, want)
		}
		history = append(history, map[string]any{"role": "assistant", "content": "a0"}, map[string]any{"role": "user", "content": "q1"})
		var wg sync.WaitGroup
		codes := make([]int, 6)
		for i := range codes {
			wg.Go(func() {
				resp, _ := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil)
				codes[i] = resp.StatusCode
			})
		}
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusOK {
				t.Errorf("request %d: %d", i, c)
			}
		}
		// The fake answers "ok" once its script is empty: one reply
		// recorded, after the one q1.
		want = append(want, "user: q1", "assistant: ok")
		s.waitLog(session, want)
		time.Sleep(300 * time.Millisecond) // a recording late by that much would show
		if got := s.logOf(session); !slices.Equal(got, want) {
			t.Errorf("log after six identical requests at once:\n got %q\nwant %q", got, want)
		}
	})
}
