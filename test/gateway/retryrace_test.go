package gateway_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"
)

// TestConcurrentRetriesOfAnExtension: a request that extends a session,
// sent several times at once (a client's retries racing each other, or the
// same request on two replicas), appends its new message once and records
// one reply. Its append carries the version its history was matched at and
// no idempotency key: the requests that lost the race conflict, are
// matched again and find the message stored (docs/gateway.md). Without the
// version, each appended the message again. Every request is answered in
// the session: one that finds the session busy with its twin (the same
// whole history upstream) waits for the twin's answer and is a repeat.
// Without that, such a request went on in a session of its own (a
// rewound fork: under load, in at least 4 of 30 runs on SQLite and 1 on
// PostgreSQL).
func TestConcurrentRetriesOfAnExtension(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		session, history := s.firstExchange()
		history = append(history, map[string]any{"role": "assistant", "content": "a0"}, map[string]any{"role": "user", "content": "q1"})
		var wg sync.WaitGroup
		codes, landed, how := make([]int, 6), make([]string, 6), make([]string, 6)
		for i := range codes {
			wg.Go(func() {
				resp, _, err := s.send("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil)
				if err != nil {
					return // codes[i] stays 0
				}
				codes[i] = resp.StatusCode
				landed[i] = resp.Header.Get("X-Contextd-Session")
				how[i] = resp.Header.Get("X-Contextd-History")
			})
		}
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusOK {
				t.Errorf("request %d: %d", i, c)
			}
			if landed[i] != "" {
				t.Errorf("request %d landed in %q, a session of its own, not its twin's %q", i, landed[i], session)
			}
		}
		// The fake answers "ok" once its script is empty: one reply
		// recorded, after the one q1.
		want := []string{"user: q0", "assistant: a0", "user: q1", "assistant: ok"}
		// Each request's usage and reply are recorded in one transaction
		// (RecordExchange): once the ledger holds all seven calls, every
		// recording has landed.
		s.checkLedger(session)
		if got := s.logOf(session); !slices.Equal(got, want) {
			t.Errorf("log after six identical requests at once (answered as %q):\n got %q\nwant %q", how, got, want)
		}
	})
}
