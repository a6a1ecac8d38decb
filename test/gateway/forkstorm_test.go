package gateway_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/pgtest"
)

// A retry storm past the fork budget (issue 29, the gateway's
// leftovers): a signalled client that rewound to the same history and
// went on from it 64 times has spent the fork chain freeFork reads; its
// next rewind goes on in a session past the chain. Identical requests
// sent at once (a client's retries, replicas behind a balancer) land in
// one session, on SQLite and PostgreSQL, and the next rewind after that
// one went on is a session of its own again.

// TestRetryStormPastTheForkBudget: 64 rewinds that each go on, then six
// identical rewinds at once, each streamed slowly so that all are in
// flight together: one session for all six; then one more rewind after
// that session went on lands in another. Without the fix the six went on
// in up to six sessions of random ids (base~r…).
func TestRetryStormPastTheForkBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("64 forks")
	}
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			var env map[string]string
			if db == "postgres" {
				env = map[string]string{"CONTEXTD_DATABASE_URL": pgtest.URL(t)}
			}
			s := start(t, env)
			c := &historyClient{t: t, s: s, sig: map[string]string{"X-Contextd-Session": "storm"}}
			c.user("Fix the failing tests in calc.py.")
			c.send()
			c.user("Round 1: " + strings.Repeat("ok ", 50))
			c.send()
			opening := slices.Clone(c.msgs[:1])
			rewind := func() []map[string]any {
				return append(slices.Clone(opening), map[string]any{"role": "user", "content": "Start again with sub()."})
			}
			for i := range 64 {
				c.msgs = rewind()
				id, _, _ := c.send()
				c.user(fmt.Sprintf("Rewind %d goes on.", i))
				if got, history, _ := c.send(); got != id || history != "extended" {
					t.Fatalf("rewind %d goes on: history %q in %q, want extended in %s", i, history, got, id)
				}
			}
			s.fake.Pause = 20 * time.Millisecond
			const n = 6
			ids := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, out, err := s.send("/v1/chat/completions", map[string]any{"model": "gpt-4o", "stream": true, "messages": rewind()}, c.sig)
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%d %s", resp.StatusCode, out)
					}
					if err == nil {
						ids[i] = resp.Header.Get("X-Contextd-Session")
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
			}
			s.fake.Pause = 0
			slices.Sort(ids)
			if ids = slices.Compact(ids); len(ids) != 1 {
				t.Fatalf("six identical requests went on in %d sessions %q, want one", len(ids), ids)
			}
			if !strings.HasPrefix(ids[0], "storm~") {
				t.Errorf("session %q, want a fork of storm", ids[0])
			}
			// It goes on, and the next rewind is a session of its own.
			c.msgs = rewind()
			if got, _, _ := c.send(); got != ids[0] {
				t.Fatalf("the storm's request again: in %q, want %s", got, ids[0])
			}
			c.user("The storm's session goes on.")
			if got, history, _ := c.send(); got != ids[0] || history != "extended" {
				t.Fatalf("goes on: history %q in %q, want extended in %s", history, got, ids[0])
			}
			c.msgs = rewind()
			next, history, _ := c.send()
			if next == ids[0] || history == "extended" {
				t.Fatalf("the next rewind: history %q in %q, want a session of its own", history, next)
			}
			// A numbered fork that ended leaves a gap: the storm's session
			// deleted, the next rewind after that one went on lands in the
			// gap (the search stops there), never refused, and goes on
			// there; the session after the gap keeps its log.
			c.user("The next rewind goes on.")
			if got, history, _ := c.send(); got != next || history != "extended" {
				t.Fatalf("the next rewind goes on: history %q in %q, want extended in %s", history, got, next)
			}
			s.rpc("DeleteSession", map[string]any{"sessionId": ids[0]}, nil)
			s.waitLogLen(next, 5) // the rewind, its reply, the next prompt and its reply
			kept := len(s.logOf(next))
			c.msgs = rewind()
			gap, history, _ := c.send()
			if gap == next || history == "extended" || !strings.HasPrefix(gap, "storm~") {
				t.Fatalf("a rewind with a gap before the latest: history %q in %q, want a fork of storm of its own", history, gap)
			}
			c.user("The rewind in the gap goes on.")
			if got, history, _ := c.send(); got != gap || history != "extended" {
				t.Fatalf("the rewind in the gap goes on: history %q in %q, want extended in %s", history, got, gap)
			}
			if n := len(s.logOf(next)); n != kept {
				t.Errorf("the session after the gap: %d messages in its log, had %d", n, kept)
			}
		})
	}
}
