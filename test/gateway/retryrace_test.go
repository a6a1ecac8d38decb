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
// version, each appended the message again.
func TestConcurrentRetriesOfAnExtension(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		session, history := s.firstExchange()
		history = append(history, map[string]any{"role": "assistant", "content": "a0"}, map[string]any{"role": "user", "content": "q1"})
		var wg sync.WaitGroup
		codes, landed := make([]int, 6), make([]string, 6)
		for i := range codes {
			wg.Go(func() {
				resp, _, err := s.send("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil)
				if err != nil {
					return // codes[i] stays 0
				}
				codes[i] = resp.StatusCode
				landed[i] = resp.Header.Get("X-Contextd-Session")
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
		want := []string{"user: q0", "assistant: a0", "user: q1", "assistant: ok"}
		// Each request's usage and reply are recorded in one transaction
		// (RecordExchange): once the ledgers hold all seven calls, every
		// recording has landed. A request is answered in the session
		// (extended or repeated: the header is empty, it did not make
		// it) or, when it found the session busy with a twin, in a fork
		// of its own (rewound, named in the header).
		ids := []string{session}
		for _, id := range landed {
			if id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		s.checkLedger(ids...)
		if got := s.logOf(session); !slices.Equal(got, want) {
			t.Errorf("log after six identical requests at once:\n got %q\nwant %q", got, want)
		}
	})
}
