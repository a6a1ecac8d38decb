package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/app/apptest"
	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// Conversations with the same opening, where the first one's first call
// fails upstream (issue 29: "conversations with identical openings stay
// apart", "one session per conversation"). The session B's failed call
// made held the opening alone; A's first request, the same bytes, landed
// in it as unchanged (no session header: A did not make it) and its reply
// was recorded there; B's retry was then a repeat of it and B's next turn
// a fork: A in a session whose id it never got, B in two.

// opening is the first request both conversations send.
func opening() []any {
	return []any{map[string]any{"role": "system", "content": "You are terse."},
		map[string]any{"role": "user", "content": "TASK=checks work through the checks"}}
}

// openingTurn sends msgs and returns the answer's status, session header,
// history header and reply text.
func openingTurn(t *testing.T, s *server, msgs []any) (int, string, string, string) {
	t.Helper()
	resp, body, err := s.send("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	text := ""
	if json.Unmarshal(body, &r) == nil && len(r.Choices) > 0 {
		text = r.Choices[0].Message.Content
	}
	return resp.StatusCode, resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History"), text
}

// liveSessions lists the tenant's sessions.
func liveSessions(s *server) []string {
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	s.rpc("ListSessions", map[string]any{}, &list)
	var ids []string
	for _, ses := range list.Sessions {
		ids = append(ids, ses.ID)
	}
	return ids
}

// checkOpeningsApart runs the sequence after B's first call failed (fail
// makes it fail, heal makes the provider answer again): A's first
// request, B's retry, each one's next turn. Each conversation ends in one
// session of its own, named to it, holding nothing of the other's.
func checkOpeningsApart(t *testing.T, s *server, fail, heal func()) {
	fail()
	if code, id, _, _ := openingTurn(t, s, opening()); code == http.StatusOK || id != "" {
		t.Fatalf("B's first call: %d, session %q; want a failure naming no session (its session is deleted)", code, id)
	}
	heal()
	s.fake.Script(gatewaytest.Reply{Text: "A's answer"})
	code, a1, how, text := openingTurn(t, s, opening())
	if code != http.StatusOK || a1 == "" || text != "A's answer" {
		t.Fatalf("A's first call: %d, session %q (%s), %q; want 200 in a session named to A", code, a1, how, text)
	}
	s.fake.Script(gatewaytest.Reply{Text: "B's answer"})
	if code, id, how, text := openingTurn(t, s, opening()); code != http.StatusOK || text != "B's answer" || id == a1 {
		t.Fatalf("B's retry: %d, session %q (%s), %q; want 200, never A's session %q", code, id, how, text, a1)
	}
	s.fake.Script(gatewaytest.Reply{Text: "A2"}, gatewaytest.Reply{Text: "B2"})
	a := append(opening(), map[string]any{"role": "assistant", "content": "A's answer"}, map[string]any{"role": "user", "content": "A next"})
	// Its session is named to it once, by the answer of the request that
	// made it: the next turn is checked by A's log below.
	if code, id, how, _ := openingTurn(t, s, a); code != http.StatusOK || id != "" && id != a1 || how != "extended" {
		t.Errorf("A's next turn: %d, session %q (%s); want A's session %q extended", code, id, how, a1)
	}
	b := append(opening(), map[string]any{"role": "assistant", "content": "B's answer"}, map[string]any{"role": "user", "content": "B next"})
	code, b2, how, _ := openingTurn(t, s, b)
	if code != http.StatusOK || b2 == "" || b2 == a1 {
		t.Fatalf("B's next turn: %d, session %q (%s); want a session of B's own, named to B", code, b2, how)
	}
	wantA := []string{"user: TASK=checks work through the checks", "assistant: A's answer", "user: A next", "assistant: A2"}
	if got := s.waitLog(a1, wantA); !slices.Equal(got, wantA) {
		t.Errorf("A's session %s:\n got %q\nwant %q", a1, got, wantA)
	}
	wantB := []string{"user: TASK=checks work through the checks", "assistant: B's answer", "user: B next", "assistant: B2"}
	if got := s.waitLog(b2, wantB); !slices.Equal(got, wantB) {
		t.Errorf("B's session %s:\n got %q\nwant %q", b2, got, wantB)
	}
	if ids := liveSessions(s); len(ids) != 2 || !slices.Contains(ids, a1) || !slices.Contains(ids, b2) {
		t.Errorf("sessions %q; want A's %s and B's %s alone (the failed call's session left behind?)", ids, a1, b2)
	}
}

// TestOpeningAfterAFailedFirstCall: B's first call is refused upstream
// (429, passed on).
func TestOpeningAfterAFailedFirstCall(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		checkOpeningsApart(t, s,
			func() { s.fake.Set(func(f *gatewaytest.Fake) { f.Status = http.StatusTooManyRequests }) },
			func() { s.fake.Set(func(f *gatewaytest.Fake) { f.Status = 0 }) })
	})
}

// TestOpeningAfterAnUnreachableFirstCall: B's first call meets a
// connection closed before any answer (502, the provider not reached).
func TestOpeningAfterAnUnreachableFirstCall(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			fake := gatewaytest.New()
			t.Cleanup(fake.Close)
			target, _ := url.Parse(fake.Server.URL)
			proxy := httputil.NewSingleHostReverseProxy(target)
			var refuse atomic.Bool
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if refuse.Load() {
					conn, _, err := http.NewResponseController(w).Hijack()
					if err == nil {
						conn.Close()
					}
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			t.Cleanup(up.Close)
			env := map[string]string{"CONTEXTD_OPENAI_BASE_URL": up.URL + "/v1", "CONTEXTD_ANTHROPIC_BASE_URL": up.URL}
			if backend == "postgres" {
				env["CONTEXTD_DATABASE_URL"] = pgtest.URL(t)
			}
			s := &server{t: t, addr: apptest.Start(t, env), fake: fake}
			checkOpeningsApart(t, s, func() { refuse.Store(true) }, func() { refuse.Store(false) })
		})
	}
}

// TestRetryStormOfAFailedFirstCall: a first call refused 50 times (a
// client retrying a 429) leaves no session behind, so the tenant's
// session cap (2 here) is not spent by it, and the call that goes through
// at last makes one session.
func TestRetryStormOfAFailedFirstCall(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{"CONTEXTD_MAX_SESSIONS_PER_TENANT": "2"}
			if backend == "postgres" {
				env["CONTEXTD_DATABASE_URL"] = pgtest.URL(t)
			}
			s := start(t, env)
			s.fake.Set(func(f *gatewaytest.Fake) { f.Status = http.StatusTooManyRequests })
			for i := range 50 {
				if code, id, _, _ := openingTurn(t, s, opening()); code != http.StatusTooManyRequests || id != "" {
					t.Fatalf("retry %d: %d, session %q; want the provider's 429, naming no session", i, code, id)
				}
			}
			if ids := liveSessions(s); len(ids) != 0 {
				t.Errorf("50 failed first calls left sessions %q", ids)
			}
			s.fake.Set(func(f *gatewaytest.Fake) { f.Status = 0 })
			s.fake.Script(gatewaytest.Reply{Text: "at last"})
			code, id, how, text := openingTurn(t, s, opening())
			if code != http.StatusOK || id == "" || how != "new" || text != "at last" {
				t.Fatalf("the call that goes through: %d, session %q (%s), %q; want 200 in a new session named to it", code, id, how, text)
			}
			// Two distinct conversations still fit the cap of 2.
			other := []any{map[string]any{"role": "user", "content": "another task"}}
			if code, id2, _, _ := openingTurn(t, s, other); code != http.StatusOK || id2 == "" || id2 == id {
				t.Errorf("a second conversation under the cap: %d, session %q", code, id2)
			}
			if ids := liveSessions(s); len(ids) != 2 {
				t.Errorf("sessions %q; want the two conversations' alone", ids)
			}
		})
	}
}

// TestTwinOfAFailedFirstCall: the same first request sent twice at once
// (a request that made its session is not waited for by its twin: each
// goes on in a session of its own), the first call refused upstream while
// the other's is upstream: the other is answered in its session, named to
// it, and the failed call's session is gone.
func TestTwinOfAFailedFirstCall(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		var calls atomic.Int32
		type answer struct {
			code            int
			session, how, r string
		}
		twin := make(chan answer, 1)
		twinUp, firstAnswered := make(chan struct{}), make(chan struct{})
		s.fake.Set(func(f *gatewaytest.Fake) {
			f.Status = http.StatusTooManyRequests // the first call's (the fake reads it after Before)
			f.Before = func(string) {
				if calls.Add(1) != 1 {
					// The twin's call: upstream while the first fails.
					close(twinUp)
					<-firstAnswered
					s.fake.Set(func(f *gatewaytest.Fake) { f.Status = 0 })
					return
				}
				go func() {
					code, id, how, text := openingTurn(t, s, opening())
					twin <- answer{code, id, how, text}
				}()
				select {
				case <-twinUp:
				case <-time.After(time.Minute):
				}
			}
		})
		code, _, _, _ := openingTurn(t, s, opening())
		close(firstAnswered)
		if code != http.StatusTooManyRequests {
			t.Fatalf("the first call: %d, want the provider's 429", code)
		}
		var a answer
		select {
		case a = <-twin:
		case <-time.After(2 * time.Minute):
			t.Fatal("the twin was not answered in two minutes")
		}
		s.fake.Set(func(f *gatewaytest.Fake) { f.Before, f.Status = nil, 0 })
		if a.code != http.StatusOK || a.session == "" || a.r != "ok" {
			t.Fatalf("the twin: %d, session %q (%s), %q; want 200 in a session named to it", a.code, a.session, a.how, a.r)
		}
		want := []string{"user: TASK=checks work through the checks", "assistant: ok"}
		if got := s.waitLog(a.session, want); !slices.Equal(got, want) {
			t.Errorf("the twin's session:\n got %q\nwant %q", got, want)
		}
		if ids := liveSessions(s); len(ids) != 1 {
			t.Errorf("sessions %q; want the twin's alone", ids)
		}
	})
}
