package gateway_test

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestNextRoundWhileAnAsideIsUpstream: a client without a signal asks for
// the summary of its history (an aside: answered from its session, nothing
// stored) and, while that call is upstream, its conversation goes on: the
// next round extends the session. An aside appends nothing, so its call
// does not hold the session (holdCall, as a repeat's does not); it did,
// and the round went on in a session of its own (a fork holding a copy).
func TestNextRoundWhileAnAsideIsUpstream(t *testing.T) {
	s := start(t, nil)
	c := newCompressingClient(t, s, "H")
	c.rounds(3)
	last := c.callID(c.next - 1)
	round := append(slices.Clone(c.msgs), result(last, c.next-1))
	ask := append(slices.Clone(round), map[string]any{"role": "user", "content": qwenDirective})
	// The round's reply is taken first: the aside's call takes its own
	// once it is let go.
	id := c.callID(c.next)
	s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{ID: id, Name: "read_file", Arguments: `{"path":"` + id + `.go"}`}}},
		gatewaytest.Reply{Text: "<state_snapshot>Three files were read; the tests still fail.</state_snapshot>"})
	asked := s.sendHeld(map[string]any{"model": "gpt-4o", "messages": ask})
	resp, out := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": round}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the next round: %d %s", resp.StatusCode, out)
	}
	how := resp.Header.Get("X-Contextd-History")
	if h := asked(); h != "aside" {
		t.Errorf("the summary request: history %q, want aside", h)
	}
	if how != "extended" {
		t.Errorf("the next round, while the summary request is upstream: history %q, want extended", how)
	}
	if n := len(s.sessionLogs()); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}

// sendHeld sends body while the first call upstream from now on (body's)
// is held there: it returns once that call is upstream, and the function
// it returns lets the call go and returns the history of body's answer.
func (s *server) sendHeld(body any) func() string {
	s.t.Helper()
	var calls atomic.Int32
	upstream, release := make(chan struct{}), make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	s.t.Cleanup(free)
	s.fake.Set(func(f *gatewaytest.Fake) {
		f.Before = func(string) {
			if calls.Add(1) == 1 {
				close(upstream)
				select {
				case <-release:
				case <-time.After(time.Minute):
				}
			}
		}
	})
	s.t.Cleanup(func() { s.fake.Set(func(f *gatewaytest.Fake) { f.Before = nil }) })
	done := make(chan string, 1)
	go func() {
		resp, _, err := s.send("/v1/chat/completions", body, nil)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- resp.Header.Get("X-Contextd-History")
	}()
	select {
	case <-upstream:
	case <-time.After(time.Minute):
		s.t.Fatal("the held request did not go upstream")
	}
	return func() string {
		free()
		return <-done
	}
}
