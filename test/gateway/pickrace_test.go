package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// TestPickLostToATwinLeavesNoMark: two requests pick the same prefilled
// reply at once, with different questions after it (a client's two
// branches, on two replicas). Both are matched as picks of the session;
// one records its pick and appends, the other meets a version conflict,
// is matched again and — no longer a pick, the session having gone on —
// starts a session of its own. Its messages must not carry the mark of a
// pick (contextd.gateway.picked) from its first attempt: the log cache
// would read it in the new session and drop the message before the
// client's version, so the branch's next turn, which extends its session,
// was not matched to it and went on in a third session.
//
// The interleaving is made: the test holds the session's row, so both
// requests, matched, wait for it in PrepareContext's transaction.
func TestPickLostToATwinLeavesNoMark(t *testing.T) {
	url := pgtest.URL(t)
	a := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	b := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
	tc := prefillTurn(`{"port": 8080, "name": "contextd"}`)
	a.fake.Script(gatewaytest.Reply{Text: tc.script}, gatewaytest.Reply{Text: "branch one"}, gatewaytest.Reply{Text: "next"})
	b.fake.Script(gatewaytest.Reply{Text: "branch two"}, gatewaytest.Reply{Text: "next"})
	resp, raw := a.post(tc.path, tc.first(false), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first: %d %s", resp.StatusCode, raw)
	}
	id := resp.Header.Get("X-Contextd-Session")
	a.waitLogLen(id, tc.logLen)

	waiting, release := holdSession(t, url, id)
	// branch is one branch's second request.
	branch := func(question string) map[string]any {
		body := tc.second(tc.kept)
		msgs := body["messages"].([]any)
		msgs[len(msgs)-1] = map[string]any{"role": "user", "content": question}
		return body
	}
	type answer struct {
		code           int
		history, named string
		body           []byte
	}
	send := func(s *server, body map[string]any) chan answer {
		out := make(chan answer, 1)
		go func() {
			resp, raw, err := s.send(tc.path, body, nil)
			if err != nil {
				out <- answer{body: []byte(err.Error())}
				return
			}
			out <- answer{resp.StatusCode, resp.Header.Get("X-Contextd-History"), resp.Header.Get("X-Contextd-Session"), raw}
		}()
		return out
	}
	questions := []string{"Now add the log level", "Now add the port range"}
	one, two := send(a, branch(questions[0])), send(b, branch(questions[1]))
	deadline := time.Now().Add(20 * time.Second)
	for waiting() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the two requests did not wait for the session's row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	release()
	answers := []answer{<-one, <-two}
	servers, replies := []*server{a, b}, []string{"branch one", "branch two"}
	lost := -1
	for i, ans := range answers {
		if ans.code != http.StatusOK {
			t.Fatalf("branch %d: %d %s", i, ans.code, ans.body)
		}
		if ans.history != "extended" {
			lost = i
		}
	}
	if lost < 0 || answers[1-lost].history != "extended" {
		t.Fatalf("histories %q and %q: want one pick extended, the other a session of its own", answers[0].history, answers[1].history)
	}
	own := answers[lost].named
	servers[lost].waitLogLen(own, 4)
	// The lost branch's next turn extends its own session.
	next := branch(questions[lost])
	next["messages"] = append(next["messages"].([]any), map[string]any{"role": "assistant", "content": replies[lost]},
		map[string]any{"role": "user", "content": "Thanks"})
	resp, raw = servers[lost].post(tc.path, next, map[string]string{"X-Contextd-Session": own})
	if h := resp.Header.Get("X-Contextd-History"); resp.StatusCode != http.StatusOK || h != "extended" || resp.Header.Get("X-Contextd-Session") != own {
		t.Errorf("the lost branch's next turn: %d history %q session %q, want extended in %s: %s", resp.StatusCode, h, resp.Header.Get("X-Contextd-Session"), own, raw)
	}
	servers[lost].waitLogLen(own, 6)
	if log := servers[lost].logOf(own); len(log) != 6 {
		t.Errorf("the lost branch's session's log is %q, want its 6 messages", log)
	}
}
