package gateway_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestSignalledFailedFirstCallKeepsItsSession: a first call under a
// session signal (X-Contextd-Session, or a client's session id the
// session's id derives from) whose call fails leaves its session: the
// signal is its identity, so no stranger with the same opening lands in
// it, and deleting it would pull it from under a request that joined it
// without writing (an aside, a repeat), whose usage would be lost (issue
// 29). The retry joins it unchanged and is recorded there once.
func TestSignalledFailedFirstCallKeepsItsSession(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		for _, c := range []struct{ name, header, value, id string }{
			{"explicit", "X-Contextd-Session", "keep-me", "keep-me"},
			{"derived", "Session_id", "codex-thread-1", ""},
		} {
			s.fake.Set(func(f *gatewaytest.Fake) { f.Status = http.StatusTooManyRequests })
			body := map[string]any{"model": "gpt-4o", "messages": opening()}
			h := map[string]string{c.header: c.value}
			resp, _, err := s.send("/v1/chat/completions", body, h)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("%s: the failed call: %d, want the provider's 429", c.name, resp.StatusCode)
			}
			s.fake.Set(func(f *gatewaytest.Fake) { f.Status = 0 })
			s.fake.Script(gatewaytest.Reply{Text: "retried"})
			resp, _, err = s.send("/v1/chat/completions", body, h)
			if err != nil {
				t.Fatal(err)
			}
			id, how := resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History")
			if resp.StatusCode != http.StatusOK || id == "" || c.id != "" && id != c.id || how != "unchanged" {
				t.Fatalf("%s: the retry: %d, session %q (%s); want 200 in the signal's session, kept by the failure (unchanged)", c.name, resp.StatusCode, id, how)
			}
			want := []string{"user: TASK=checks work through the checks", "assistant: retried"}
			if got := s.waitLog(id, want); !slices.Equal(got, want) {
				t.Errorf("%s: session %s:\n got %q\nwant %q", c.name, id, got, want)
			}
		}
	})
}
