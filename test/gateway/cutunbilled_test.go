package gateway_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestCutBeforeAnyTextIsNotBilled: a first streamed call cut after its
// role chunk alone (no text, no usage: no sign the provider billed it)
// records nothing, so the session it made is undone like any failed
// first call's (issue 29) and the retry makes the conversation's session
// anew. It was recorded as an estimated call, which kept the session.
func TestCutBeforeAnyTextIsNotBilled(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		body := map[string]any{"model": "gpt-4o", "stream": true, "messages": opening()}
		s.fake.Set(func(f *gatewaytest.Fake) { f.DropAfter = 1 })
		s.fake.Script(gatewaytest.Reply{Text: "never seen"})
		resp, _, err := s.send("/v1/chat/completions", body, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the cut stream: %v %v", err, resp)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if ids := waitNoSessions(s); len(ids) != 0 {
			t.Errorf("sessions %q after a stream cut before any text; want none (nothing billed, the session undone)", ids)
		}
		s.fake.Set(func(f *gatewaytest.Fake) { f.DropAfter = 0 })
		s.fake.Script(gatewaytest.Reply{Text: "whole"})
		if code, id, how, _ := openingTurn(t, s, opening()); code != http.StatusOK || id == "" || how != "new" {
			t.Fatalf("the retry: %d, session %q (%s); want 200 in a new session", code, id, how)
		}
	})
}

// waitNoSessions polls the tenant's sessions until there are none (an
// undo runs as the request ends, after the client read the answer's end),
// for up to five seconds; it returns the last list.
func waitNoSessions(s *server) []string {
	ids := liveSessions(s)
	for deadline := time.Now().Add(5 * time.Second); len(ids) > 0 && time.Now().Before(deadline); ids = liveSessions(s) {
		time.Sleep(20 * time.Millisecond)
	}
	return ids
}
