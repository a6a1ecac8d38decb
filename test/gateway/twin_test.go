package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// twinAnswer is what the twin of a call got.
type twinAnswer struct {
	code          int
	session, how  string
	reply         string
	err           error
	whileUpstream bool // answered while the first call was still upstream
}

// sendTwin sends an extension of the session, and its twin (the same
// whole history) while the first is upstream: the fake holds the first
// call until the twin is answered or two seconds passed, then answers it
// with first (a status, or 0 for the reply "a1"; -1: it hangs, and the
// first's client goes away). It returns the session and what the twin
// got.
func sendTwin(t *testing.T, s *server, first int) (string, twinAnswer) {
	session, history := s.firstExchange()
	if session == "" {
		t.Fatal("the first exchange named no session")
	}
	history = append(history, map[string]any{"role": "assistant", "content": "a0"}, map[string]any{"role": "user", "content": "q1"})
	body := map[string]any{"model": "gpt-4o", "messages": history}
	var calls atomic.Int32
	client, leave := context.WithCancel(context.Background())
	defer leave()
	twin := make(chan twinAnswer, 1)
	s.fake.Script(gatewaytest.Reply{Text: "a1"})
	s.fake.Set(func(f *gatewaytest.Fake) {
		f.Before = func(string) {
			if calls.Add(1) != 1 {
				s.fake.Set(func(f *gatewaytest.Fake) { f.Status, f.Hang = 0, false }) // the twin's own call, if any
				return
			}
			// The first call is upstream: its twin comes now.
			done := make(chan twinAnswer, 1)
			go func() {
				var a twinAnswer
				resp, out, err := s.send("/v1/chat/completions", body, nil)
				if a.err = err; err == nil {
					a.code, a.session, a.how = resp.StatusCode, resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History")
					var r struct {
						Choices []struct {
							Message struct {
								Content string `json:"content"`
							} `json:"message"`
						} `json:"choices"`
					}
					if json.Unmarshal(out, &r) == nil && len(r.Choices) > 0 {
						a.reply = r.Choices[0].Message.Content
					}
				}
				done <- a
			}()
			select {
			case a := <-done:
				a.whileUpstream = true
				twin <- a
			case <-time.After(2 * time.Second):
				go func() { twin <- <-done }()
			}
			if first < 0 {
				s.fake.Set(func(f *gatewaytest.Fake) { f.Hang = true })
				time.AfterFunc(200*time.Millisecond, leave)
				return
			}
			s.fake.Set(func(f *gatewaytest.Fake) { f.Status = first })
		}
	})
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(client, http.MethodPost, s.url("/v1/chat/completions"), bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if first < 0 {
		if err == nil {
			resp.Body.Close()
			t.Fatalf("the first call, hanging, was answered: %d", resp.StatusCode)
		}
	} else {
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if first == 0 && resp.StatusCode != http.StatusOK || first != 0 && resp.StatusCode != first {
			t.Fatalf("the first call: %d %s", resp.StatusCode, out)
		}
	}
	var a twinAnswer
	select {
	case a = <-twin:
	case <-time.After(2 * time.Minute):
		t.Fatal("the twin was not answered in two minutes")
	}
	s.fake.Set(func(f *gatewaytest.Fake) { f.Before, f.Status = nil, 0 })
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.session != "" {
		t.Errorf("the twin landed in %q, a session of its own (%s), not the session of the call it repeats", a.session, a.how)
	}
	if a.whileUpstream {
		t.Errorf("the twin was answered (%d, %s) while the call it repeats was upstream: it did not wait for it", a.code, a.how)
	}
	return session, a
}

// TestTwinWaitsForTheCall: a request whose whole history is the call
// upstream in its session (the same request sent twice at once) waits for
// that call's answer and is a repeat of the session: answered (the
// provider's own answer to the view without the reply), nothing stored.
// Without the wait (busy skipping the session), the twin went on at once
// in a rewound fork of its own, named in X-Contextd-Session.
// TestConcurrentRetriesOfAnExtension sees the same only when the race
// falls that way.
func TestTwinWaitsForTheCall(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		session, a := sendTwin(t, s, 0)
		if a.code != http.StatusOK || a.how != "repeated" || a.reply == "" {
			t.Errorf("the twin: %d, history %q, reply %q; want 200, repeated, a reply", a.code, a.how, a.reply)
		}
		s.waitRecorded(session)
		want := []string{"user: q0", "assistant: a0", "user: q1", "assistant: a1"}
		if got := s.logOf(session); !slices.Equal(got, want) {
			t.Errorf("log:\n got %q\nwant %q", got, want)
		}
	})
}

// TestTwinOfAFailedCall: when the call a twin waits for fails upstream,
// the twin is no repeat (the session holds no reply to repeat, and the
// provider's error is not the twin's): it goes upstream itself, in the
// session, and its reply is recorded as the session's.
func TestTwinOfAFailedCall(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		session, a := sendTwin(t, s, http.StatusInternalServerError)
		if a.code != http.StatusOK || a.how != "unchanged" || a.reply != "ok" {
			t.Errorf("the twin: %d, history %q, reply %q; want 200, unchanged, the provider's reply", a.code, a.how, a.reply)
		}
		want := []string{"user: q0", "assistant: a0", "user: q1", "assistant: ok"}
		if got := s.waitLog(session, want); !slices.Equal(got, want) {
			t.Errorf("log:\n got %q\nwant %q", got, want)
		}
	})
}

// TestTwinOfAnAbandonedCall: when the client of the call a twin waits for
// goes away (the provider hangs), the twin is not kept waiting out its
// minute and then sent to a fork: once the abandoned call unwinds it goes
// upstream itself, in the session, and its reply is recorded.
func TestTwinOfAnAbandonedCall(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		start := time.Now()
		session, a := sendTwin(t, s, -1)
		if a.code != http.StatusOK || a.how != "unchanged" || a.reply != "ok" {
			t.Errorf("the twin: %d, history %q, reply %q; want 200, unchanged, the provider's reply", a.code, a.how, a.reply)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("the twin was answered after %v: it waited out its minute", d)
		}
		want := []string{"user: q0", "assistant: a0", "user: q1", "assistant: ok"}
		if got := s.waitLog(session, want); !slices.Equal(got, want) {
			t.Errorf("log:\n got %q\nwant %q", got, want)
		}
	})
}

// TestNextTurnWhileATwinRepeats: the client of two identical requests at
// once goes on with the first answer while the second (the twin, a repeat
// of the session) is still upstream: its next turn extends the session.
// A repeat appends nothing to the log, so its call upstream does not keep
// the session from the conversation's next turn.
func TestNextTurnWhileATwinRepeats(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		session, history := s.firstExchange()
		history = append(history, map[string]any{"role": "assistant", "content": "a0"}, map[string]any{"role": "user", "content": "q1"})
		body := map[string]any{"model": "gpt-4o", "messages": history}
		var calls atomic.Int32
		repeating, release := make(chan struct{}), make(chan struct{})
		defer close(release)
		twin := make(chan string, 1)
		s.fake.Script(gatewaytest.Reply{Text: "a1"})
		s.fake.Set(func(f *gatewaytest.Fake) {
			f.Before = func(string) {
				switch calls.Add(1) {
				case 1: // the first call is upstream: its twin comes now
					go func() {
						resp, _, err := s.send("/v1/chat/completions", body, nil)
						if err != nil {
							twin <- err.Error()
							return
						}
						twin <- resp.Header.Get("X-Contextd-History")
					}()
					time.Sleep(300 * time.Millisecond)
				case 2: // the twin's own call, upstream until the next turn is answered
					close(repeating)
					select {
					case <-release:
					case <-time.After(time.Minute):
					}
				}
			}
		})
		defer s.fake.Set(func(f *gatewaytest.Fake) { f.Before = nil })
		if resp, out := s.post("/v1/chat/completions", body, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("the first call: %d %s", resp.StatusCode, out)
		}
		select {
		case <-repeating:
		case <-time.After(time.Minute):
			t.Fatal("the twin's call did not go upstream")
		}
		s.waitLog(session, []string{"user: q0", "assistant: a0", "user: q1", "assistant: a1"})
		next := append(history, map[string]any{"role": "assistant", "content": "a1"}, map[string]any{"role": "user", "content": "q2"})
		resp, out := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": next}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the next turn: %d %s", resp.StatusCode, out)
		}
		if id, how := resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History"); id != "" || how != "extended" {
			t.Errorf("the next turn, while the twin repeats: history %q in %q; want extended in the session", how, id)
		}
		release <- struct{}{}
		if how := <-twin; how != "repeated" {
			t.Errorf("the twin: %q, want repeated", how)
		}
	})
}
