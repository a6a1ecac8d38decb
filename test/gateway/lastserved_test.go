package gateway_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// TestServedSessionNotTheLongest: replica a served two sessions of the
// same history (identical first requests at once), and its log cache
// knows one of them by that history's head; replica b then extends one of
// the two. A request of a that carries b's extension goes on in the
// session b extended — the longest prefix, found by the history index's
// read of the request's new chains (lastserved.go: no session may hold
// them as its head) — never in the one a's cache names, whose log is
// still a prefix of the request. Which of the two b extends is random
// (identify shuffles sessions of the same history), so the case is made
// several times: a fast path that skips the index's verdict goes on in
// the other session about every second time.
func TestServedSessionNotTheLongest(t *testing.T) {
	url := pgtest.URL(t)
	a := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	b := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	user := func(text string) any { return map[string]any{"role": "user", "content": text} }
	reply := func(text string) any { return map[string]any{"role": "assistant", "content": text} }
	for trial := range 6 {
		q, r := fmt.Sprintf("q0 of %d", trial), fmt.Sprintf("a0 of %d", trial)
		// Two identical first requests at once on a: each in a session
		// of its own (neither waits for the other's call), both answered
		// alike, so the two logs are the same history.
		arrived := make(chan struct{}, 2)
		release := make(chan struct{})
		a.fake.Set(func(f *gatewaytest.Fake) {
			f.Before = func(string) {
				arrived <- struct{}{}
				select {
				case <-release:
				case <-time.After(10 * time.Second):
				}
			}
		})
		a.fake.Script(gatewaytest.Reply{Text: r}, gatewaytest.Reply{Text: r})
		ids := make([]string, 2)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, _, err := a.send("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": []any{user(q)}}, nil)
				if err == nil && resp.StatusCode == http.StatusOK {
					ids[i] = resp.Header.Get("X-Contextd-Session")
				}
			}()
		}
		for range ids {
			select {
			case <-arrived:
			case <-time.After(10 * time.Second):
				t.Fatalf("trial %d: the identical requests did not both reach the provider", trial)
			}
		}
		close(release)
		wg.Wait()
		a.fake.Set(func(f *gatewaytest.Fake) { f.Before = nil })
		if ids[0] == "" || ids[1] == "" || ids[0] == ids[1] {
			t.Fatalf("trial %d: sessions %q, want two", trial, ids)
		}
		first := []string{"user: " + q, "assistant: " + r}
		for _, id := range ids {
			if got := a.waitLog(id, first); !slices.Equal(got, first) {
				t.Fatalf("trial %d: %s holds %q, want %q", trial, id, got, first)
			}
		}
		// b extends one of them.
		b.fake.Script(gatewaytest.Reply{Text: "a1"})
		history := []any{user(q), reply(r), user("q1")}
		if resp, body := b.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("trial %d, b: %d %s", trial, resp.StatusCode, body)
		}
		extended := slices.Concat(first, []string{"user: q1", "assistant: a1"})
		longer, other := "", ""
		for deadline := time.Now().Add(10 * time.Second); longer == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			for i, id := range ids {
				if slices.Equal(b.logOf(id), extended) {
					longer, other = id, ids[1-i]
				}
			}
		}
		if longer == "" {
			t.Fatalf("trial %d: neither session holds b's extension: %q, %q", trial, b.logOf(ids[0]), b.logOf(ids[1]))
		}
		// a, with b's extension and a question of its own.
		a.fake.Script(gatewaytest.Reply{Text: "a2"})
		history = append(history, reply("a1"), user("q2"))
		if resp, body := a.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("trial %d, a: %d %s", trial, resp.StatusCode, body)
		}
		want := slices.Concat(extended, []string{"user: q2", "assistant: a2"})
		if got := a.waitLog(longer, want); !slices.Equal(got, want) {
			t.Errorf("trial %d: the session b extended holds %q, want %q", trial, got, want)
		}
		if got := a.logOf(other); !slices.Equal(got, first) {
			t.Errorf("trial %d: the other session holds %q, want %q", trial, got, first)
		}
	}
	a.checkUpstream()
	b.checkUpstream()
}
