package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// TestTwoReplicas: two servers on one PostgreSQL database, an agent whose
// calls alternate between them without waiting between calls (so a reply
// may not be recorded by the replica that relayed it before the next call
// reaches the other): one session, every message once, in order.
func TestTwoReplicas(t *testing.T) {
	url := pgtest.URL(t)
	a := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	b := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	replicas := []*server{a, b}
	history := []any{map[string]any{"role": "system", "content": "sys"}, map[string]any{"role": "user", "content": "q0"}}
	var want []string
	want = append(want, "user: q0")
	session := ""
	for i := range 12 {
		s := replicas[i%2]
		answer := fmt.Sprintf("a%d", i)
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
		var out struct {
			Choices []struct {
				Message map[string]any `json:"message"`
			} `json:"choices"`
		}
		_ = json.Unmarshal(body, &out)
		q := fmt.Sprintf("q%d", i+1)
		history = append(history, out.Choices[0].Message, map[string]any{"role": "user", "content": q})
		want = append(want, "assistant: "+answer, "user: "+q)
	}
	// The last question is not sent yet: the log ends with the last answer.
	want = want[:len(want)-1]
	if got := a.waitLog(session, want); !slices.Equal(got, want) {
		t.Errorf("log:\n got %q\nwant %q", got, want)
	}
	a.checkUpstream()
	b.checkUpstream()
}

// TestConcurrentIdenticalRequests: the same request sent several times at
// once (a client's retries racing each other) appends its messages once.
func TestConcurrentIdenticalRequests(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		msgs := []any{map[string]any{"role": "user", "content": "only once"}}
		var wg sync.WaitGroup
		ids := make([]string, 6)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, _ := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": msgs}, nil)
				ids[i] = resp.Header.Get("X-Contextd-Session")
			}()
		}
		wg.Wait()
		// Identical requests at once cannot be told from strangers that
		// start alike: none waits for another's call, each that made a
		// session holds "only once" once, and every one is in some session
		// once (a repeat of an answered one stores nothing).
		made := 0
		for _, id := range ids {
			if id == "" {
				continue
			}
			made++
			n := 0
			for _, line := range s.logOf(id) {
				if line == "user: only once" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("session %s holds the user turn %d times", id, n)
			}
		}
		if made == 0 {
			t.Errorf("no request made a session: %q", ids)
		}
	})
}

// TestReplyAfterALateReport: the report of a call relayed by another
// replica may commit after this call's prepare (the race of
// TestTwoReplicas, made certain here): the session's version moved but its
// log did not grow, and this call's reply is still recorded.
func TestReplyAfterALateReport(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		session, history := s.firstExchange()
		// While the provider answers the second call, a report comes in
		// (as the other replica's would, late).
		// (The hook runs in the fake's handler: it reports what went wrong
		// instead of failing the test there.)
		reports := make(chan error, 4)
		s.fake.Set(func(f *gatewaytest.Fake) {
			f.Before = func(string) {
				resp, err := http.Post(s.url("/contextd.v1.ContextService/ReportUsage"), "application/json",
					strings.NewReader(`{"sessionId":"`+session+`","inputTokens":40,"outputTokens":2}`))
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("ReportUsage: %s", resp.Status)
					}
				}
				reports <- err
			}
		})
		history = append(history, map[string]any{"role": "assistant", "content": "a0"}, map[string]any{"role": "user", "content": "q1"})
		s.fake.Script(gatewaytest.Reply{Text: "a1"})
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": history}, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Contextd-History") != "extended" {
			t.Fatalf("second call: %d %s (session %s)", resp.StatusCode, body, resp.Header.Get("X-Contextd-Session"))
		}
		if n := len(reports); n != 1 {
			t.Fatalf("the late report ran %d times, want 1", n)
		}
		if err := <-reports; err != nil {
			t.Fatal(err)
		}
		want := []string{"user: q0", "assistant: a0", "user: q1", "assistant: a1"}
		if got := s.waitLog(session, want); !slices.Equal(got, want) {
			t.Errorf("log:\n got %q\nwant %q", got, want)
		}
	})
}

// bothStores runs check against a server on each store: embedded SQLite
// and PostgreSQL.
func bothStores(t *testing.T, check func(t *testing.T, s *server)) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{}
			if backend == "postgres" {
				env["CONTEXTD_DATABASE_URL"] = pgtest.URL(t)
			}
			check(t, start(t, env))
		})
	}
}
