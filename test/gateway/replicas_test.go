package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
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
		} else if id != session {
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
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{}
			if backend == "postgres" {
				env["CONTEXTD_DATABASE_URL"] = pgtest.URL(t)
			}
			s := start(t, env)
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
			// The first that arrived extended the session; the others saw
			// its reply recorded (a rewind, a session of their own) or got
			// there before it: either way "only once" is in the first
			// session once.
			first := ids[0]
			for _, id := range ids {
				if len(id) < len(first) {
					first = id
				}
			}
			got := s.logOf(first)
			n := 0
			for _, line := range got {
				if line == "user: only once" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("session %s holds the user turn %d times: %q", first, n, got)
			}
		})
	}
}
