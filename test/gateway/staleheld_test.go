package gateway_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// TestStaleHeldRowWithClientEdits: replica a served a conversation last
// and holds its row; replica b then extends it, so a's held row is stale.
// The next call goes to a: its match takes the held row (lastserved.go),
// and the client's edits of the request (every extension plans them) are
// planned on it before PrepareContext's transaction, where the row read
// (a has no view cache: CONTEXTD_VIEW_CACHE_BYTES=0, so the view is read
// with the row) shows the session moved. The call goes on in the session,
// every message once (staleHeld: matched again by the index at once).
// Fails without staleHeld: the conflict came before the transaction, the
// held row was never dropped, and every retry took it again until the
// conflicts' budget ran out (409 after 10 s).
func TestStaleHeldRowWithClientEdits(t *testing.T) {
	url := pgtest.URL(t)
	a := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url, "CONTEXTD_VIEW_CACHE_BYTES": "0"})
	b := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	user := func(text string) any { return map[string]any{"role": "user", "content": text} }
	reply := func(text string) any { return map[string]any{"role": "assistant", "content": text} }
	var history []any
	var want []string
	session := ""
	call := func(s *server, i int, q, answer string) {
		t.Helper()
		history = append(history, user(q))
		s.fake.Script(gatewaytest.Reply{Text: answer})
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
		if id := resp.Header.Get("X-Contextd-Session"); session == "" {
			session = id
		} else if id != "" || resp.Header.Get("X-Contextd-History") != "extended" {
			t.Fatalf("call %d landed in %s (%s), want %s", i, id, resp.Header.Get("X-Contextd-History"), session)
		}
		history = append(history, reply(answer))
		want = append(want, "user: "+q, "assistant: "+answer)
		// Recorded before the next call: a's held row is its recording's.
		if got := a.waitLog(session, want); !slices.Equal(got, want) {
			t.Fatalf("after call %d: log %q, want %q", i, got, want)
		}
	}
	call(a, 0, "q0", "a0") // a holds the row
	call(a, 1, "q1", "a1") // a served it last
	call(b, 2, "q2", "a2") // a's held row is stale
	call(a, 3, "q3", "a3") // planned on the stale row
	call(a, 4, "q4", "a4")
	a.checkUpstream()
	b.checkUpstream()
}
