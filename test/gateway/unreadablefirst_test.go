package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/contextd/contextd/internal/app/apptest"
	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestUnreadableFirstAnswerNamesNoSession: a first call whose 200 JSON
// answer is cut before its end (a 502: the answer could not be read)
// records nothing, so its session is deleted with the failure (issue 29):
// the 502 names no session, and the retry makes the conversation's
// session anew.
func TestUnreadableFirstAnswerNamesNoSession(t *testing.T) {
	fake := gatewaytest.New()
	t.Cleanup(fake.Close)
	target, _ := url.Parse(fake.Server.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var cut atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cut.Load() && strings.HasSuffix(r.URL.Path, "/chat/completions") {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err == nil {
				buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\":")
				buf.Flush()
				conn.Close()
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	s := &server{t: t, addr: apptest.Start(t, map[string]string{"CONTEXTD_OPENAI_BASE_URL": up.URL + "/v1"}), fake: fake}
	cut.Store(true)
	if code, id, _, _ := openingTurn(t, s, opening()); code != http.StatusBadGateway || id != "" {
		t.Fatalf("the cut answer: %d, session %q; want 502 naming no session (its session is deleted)", code, id)
	}
	if ids := liveSessions(s); len(ids) != 0 {
		t.Errorf("sessions %q after the failed first call; want none", ids)
	}
	cut.Store(false)
	s.fake.Script(gatewaytest.Reply{Text: "read"})
	if code, id, how, text := openingTurn(t, s, opening()); code != http.StatusOK || id == "" || how != "new" || text != "read" {
		t.Fatalf("the retry: %d, session %q (%s), %q; want 200 in a new session named to it", code, id, how, text)
	}
}
