package gateway_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// TestUnchangedRequestAfterTheLogMoved: a request whose history is the
// session's log (nothing new to append: X-Contextd-History unchanged)
// appends nothing, so no version checks that the log is still as it was
// matched when PrepareContext reads it. When a message came in between
// (its twin's reply recorded meanwhile: TestConcurrentRetriesOfAnExtension
// stored "assistant: ok" twice on PostgreSQL about once in 20 runs under
// load), the view the request sends holds that message, which its client
// never had, and its reply was recorded with the log count PrepareContext
// returned, so it was appended after it. The request is matched again
// instead: its reply is never appended after a message it did not carry.
//
// The interleaving is made, not hoped for: the test holds the session's
// row; an AppendMessages ("x", standing for the twin's reply) waits for
// it; then the request is matched (reads do not wait) and waits for the
// row in PrepareContext, behind the append. Fails before: the log ended
// "assistant: x" "assistant: b".
func TestUnchangedRequestAfterTheLogMoved(t *testing.T) {
	url := pgtest.URL(t)
	s := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	session, history := s.firstExchange()
	text := func(role, s string) map[string]any {
		return map[string]any{"role": role, "parts": []any{map[string]any{"text": map[string]any{"text": s}}}}
	}
	s.rpc("AppendMessages", map[string]any{"sessionId": session, "messages": []any{text("ROLE_USER", "q1")}}, nil)
	history = append(history, map[string]any{"role": "assistant", "content": "a0"}, map[string]any{"role": "user", "content": "q1"})
	s.fake.Script(gatewaytest.Reply{Text: "b"})

	waiting, release := holdSession(t, url, session)
	appended := s.rpcAsync("AppendMessages", map[string]any{"sessionId": session, "messages": []any{text("ROLE_ASSISTANT", "x")}})
	awaitWaiting(t, waiting, 1, "the append")
	type answer struct {
		code     int
		how, err string
	}
	served := make(chan answer, 1)
	go func() {
		resp, _, err := s.send("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil)
		if err != nil {
			served <- answer{err: err.Error()}
			return
		}
		served <- answer{code: resp.StatusCode, how: resp.Header.Get("X-Contextd-History")}
	}()
	awaitWaiting(t, waiting, 2, "the request") // matched, it waits behind the append
	release()
	if code := <-appended; code != http.StatusOK {
		t.Fatalf("AppendMessages: %d", code)
	}
	a := <-served
	if a.code != http.StatusOK {
		t.Fatalf("the request: %d %s", a.code, a.err)
	}
	// Its call is recorded, in whichever session it went on in.
	s.checkLedger(liveSessions(s)...)
	want := []string{"user: q0", "assistant: a0", "user: q1", "assistant: x"}
	if got := s.logOf(session); !slices.Equal(got, want) {
		t.Errorf("log after a request matched unchanged before x was appended (answered as %q):\n got %q\nwant %q", a.how, got, want)
	}
}
