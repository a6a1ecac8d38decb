package gateway_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// Picks (issue 29 item 3): the client's pick or merge of the gateway's
// own last reply is the same conversation. An Anthropic client that
// prefilled the reply sends back the prefill and the continuation as one
// message (or the continuation alone); a Chat Completions client that
// asked for n > 1 choices keeps one of them. Before, each went on in a
// new session with the whole history copied (history "edited").

// pickTurn is one conversation of the pick tests: the first request
// (ending, for a prefill, with the assistant's prefill), what the client
// sends back as the assistant's turn, and the question after it.
type pickTurn struct {
	path   string
	first  func(stream bool) map[string]any
	second func(kept any) map[string]any
	kept   any    // the client's version of the reply
	script string // what the fake answers first (choice 0 / the continuation)
	more   []gatewaytest.Reply
	want   string // what the active view holds in the reply's place
	logLen int    // the log's messages after the first request
}

const pickTask = "Write the config of the service as one JSON object, with its port and its name, and nothing else"

func prefillTurn(kept string) pickTurn {
	return prefillTurnOf("{", `"port": 8080, "name": "contextd"}`, kept)
}

// prefillTurnOf is a prefill turn of prefill, the continuation the fake
// answers (script) and the client's version of the turn (kept).
func prefillTurnOf(prefill, script, kept string) pickTurn {
	msgs := func(tail ...any) []any {
		return append([]any{map[string]any{"role": "user", "content": pickTask}}, tail...)
	}
	return pickTurn{path: "/v1/messages",
		first: func(stream bool) map[string]any {
			return map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": stream, "system": "You write JSON.",
				"messages": msgs(map[string]any{"role": "assistant", "content": prefill})}
		},
		second: func(kept any) map[string]any {
			return map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You write JSON.",
				"messages": msgs(map[string]any{"role": "assistant", "content": kept}, map[string]any{"role": "user", "content": "Now add the log level"})}
		},
		kept: kept, script: script, want: kept, logLen: 3,
	}
}

func choiceTurn() pickTurn {
	msgs := func(tail ...any) []any {
		return append([]any{map[string]any{"role": "system", "content": "You write JSON."},
			map[string]any{"role": "user", "content": pickTask}}, tail...)
	}
	kept := `{"port": 9090, "name": "contextd-b"} is the second choice`
	return pickTurn{path: "/v1/chat/completions",
		first: func(stream bool) map[string]any {
			return map[string]any{"model": "gpt-4o", "n": 3, "stream": stream, "messages": msgs()}
		},
		second: func(kept any) map[string]any {
			return map[string]any{"model": "gpt-4o", "messages": msgs(map[string]any{"role": "assistant", "content": kept},
				map[string]any{"role": "user", "content": "Now add the log level"})}
		},
		kept: kept, script: `{"port": 8080, "name": "contextd-a"} is the first choice`,
		more: []gatewaytest.Reply{{Text: kept}, {Text: `{"port": 7070, "name": "contextd-c"} is the third choice`}},
		want: kept, logLen: 2,
	}
}

// TestClientPicksTheReply: the client's version of the gateway's last
// reply — the prefill merged with its continuation (as they are, or
// joined by the client's newline or space), the continuation alone, the
// second of three choices — extends the session the reply was
// recorded in (one session, history "extended"), goes upstream as the
// client sent it, and is what the active view holds in the reply's place
// (the log keeps what was recorded), counted as a session of that history
// from the start counts it. Before, the second request was "edited": a
// session of its own with the history copied.
func TestClientPicksTheReply(t *testing.T) {
	turns := map[string]pickTurn{
		"prefill-merged":       prefillTurn(`{"port": 8080, "name": "contextd"}`),
		"prefill-continuation": prefillTurn(`"port": 8080, "name": "contextd"}`),
		"n3-choice2":           choiceTurn(),
		// The client joins the prefill and the continuation with a
		// separator of its own: a newline, or a space where the
		// continuation has none.
		"prefill-joined-newline": prefillTurnOf("{", ` "port": 8080, "name": "contextd"}`, "{\n"+`"port": 8080, "name": "contextd"}`),
		"prefill-joined-space":   prefillTurnOf("Here is the config", `{"port": 8080, "name": "contextd"}`, "Here is the config "+`{"port": 8080, "name": "contextd"}`),
	}
	for name, tc := range turns {
		for _, stream := range []bool{false, true} {
			t.Run(name+map[bool]string{true: "/stream", false: "/json"}[stream], func(t *testing.T) {
				s := start(t, nil)
				s.fake.Script(gatewaytest.Reply{Text: tc.script, More: tc.more}, gatewaytest.Reply{Text: `"level": "info"`}, gatewaytest.Reply{Text: `"level": "info"`})
				resp, raw := s.post(tc.path, tc.first(stream), nil)
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), "port") {
					t.Fatalf("first: %d %s", resp.StatusCode, raw)
				}
				id := resp.Header.Get("X-Contextd-Session")
				n := tc.logLen
				s.waitLogLen(id, n)
				resp, raw = s.post(tc.path, tc.second(tc.kept), nil)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("second: %d %s", resp.StatusCode, raw)
				}
				if h := resp.Header.Get("X-Contextd-History"); h != "extended" {
					t.Errorf("second: history %q, want extended", h)
				}
				var list struct {
					Sessions []struct {
						ID string `json:"id"`
					} `json:"sessions"`
				}
				s.rpc("ListSessions", map[string]any{}, &list)
				if len(list.Sessions) != 1 {
					t.Fatalf("%d sessions, want the one", len(list.Sessions))
				}
				if up := string(s.fake.Requests()[1].Raw); !strings.Contains(up, jsonText(tc.kept.(string))) {
					t.Errorf("upstream did not get the client's version %q: %s", tc.kept, up)
				}
				s.waitLogLen(id, n+2)
				view := s.messagesOf(id, "MESSAGE_VIEW_ACTIVE")
				var texts []string
				for _, m := range view {
					for _, p := range m.Parts {
						if p.Text != nil {
							texts = append(texts, m.Role+": "+p.Text.Text)
						}
					}
				}
				if len(texts) < 3 || texts[len(texts)-3] != "ROLE_ASSISTANT: "+tc.want || slices.Contains(texts, "ROLE_ASSISTANT: {") {
					t.Errorf("the active view is %q; want the client's version %q in the reply's place", texts, tc.want)
				}
				if log := s.logOf(id); !slices.Contains(log, "assistant: "+tc.script) {
					t.Errorf("the log %q does not keep the recorded reply %q", log, tc.script)
				}
				// A session of the client's history from the start
				// counts what this one does, exactly, but for what the
				// fake counted of the two upstream requests (their bytes,
				// 4 a token): the picked session's carries one more cache
				// mark (Anthropic's cache_control, where its previous
				// call's view ended), which a provider does not count.
				// Both are read after the control's call: each call's
				// report moves the model's calibration, which scales what
				// each session counts past its anchor (the reply).
				resp, _ = s.post(tc.path, tc.second(tc.kept), map[string]string{"X-Contextd-Session": "control"})
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("control: %d", resp.StatusCode)
				}
				s.waitLogLen("control", 4)
				reqs := s.fake.Requests()
				marks := int64(len(reqs[1].Raw)/4 - len(reqs[len(reqs)-1].Raw)/4)
				if before, b := s.usedTokens(id), s.usedTokens("control"); before != b+marks {
					t.Errorf("the picked session counts %d tokens, a session of the client's history from the start %d (+%d of cache marks)", before, b, marks)
				}
				// The next turn extends the session again.
				next := tc.second(tc.kept)
				key := "messages"
				next[key] = append(next[key].([]any), map[string]any{"role": "assistant", "content": `"level": "info"`},
					map[string]any{"role": "user", "content": "Thanks"})
				resp, raw = s.post(tc.path, next, nil)
				if h := resp.Header.Get("X-Contextd-History"); resp.StatusCode != http.StatusOK || h != "extended" {
					t.Errorf("third: %d history %q, want extended: %s", resp.StatusCode, h, raw)
				}
				s.rpc("ListSessions", map[string]any{}, &list)
				if len(list.Sessions) != 2 { // and the control
					t.Errorf("%d sessions, want the one and the control", len(list.Sessions))
				}
				s.checkUpstream()
			})
		}
	}
}

// TestUnrelatedReplyIsNotAPick: a conversation whose assistant message at
// the reply's place is not the reply in any form the client gives it (a
// stranger's conversation that starts alike, a reply the client wrote
// itself) is not a pick: it goes on in a session of its own, and the
// session of the reply keeps its log and view.
func TestUnrelatedReplyIsNotAPick(t *testing.T) {
	for name, tc := range map[string]pickTurn{"prefill": prefillTurn(""), "n3": choiceTurn()} {
		t.Run(name, func(t *testing.T) {
			s := start(t, nil)
			s.fake.Script(gatewaytest.Reply{Text: tc.script, More: tc.more}, gatewaytest.Reply{Text: "other"})
			resp, raw := s.post(tc.path, tc.first(false), nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("first: %d %s", resp.StatusCode, raw)
			}
			id := resp.Header.Get("X-Contextd-Session")
			s.waitLogLen(id, tc.logLen)
			before := s.logOf(id)
			resp, raw = s.post(tc.path, tc.second(`{"port": 1, "name": "mine"}`), nil)
			if h := resp.Header.Get("X-Contextd-History"); resp.StatusCode != http.StatusOK || h == "extended" {
				t.Fatalf("second: %d history %q, want a session of its own: %s", resp.StatusCode, h, raw)
			}
			if got := s.waitLog(id, before); !slices.Equal(got, before) {
				t.Errorf("the reply's session changed: %q, was %q", got, before)
			}
			var list struct {
				Sessions []any `json:"sessions"`
			}
			s.rpc("ListSessions", map[string]any{}, &list)
			if len(list.Sessions) != 2 {
				t.Errorf("%d sessions, want 2", len(list.Sessions))
			}
		})
	}
}

// TestPickAcrossReplicas: the turn after a pick reaches another replica
// (one PostgreSQL database), whose log cache is cold: it reads the log,
// where the message after the pick says what the client's version stands
// for, and the request extends the session — found by the history index
// without a signal, or named by X-Contextd-Session. Before, the pick
// itself was a fork.
func TestPickAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	for _, named := range []bool{false, true} {
		for name, tc := range map[string]pickTurn{"prefill-merged": prefillTurn(`{"port": 8080, "name": "contextd"}`), "n3-choice2": choiceTurn()} {
			t.Run(name+map[bool]string{true: "/named", false: "/index"}[named], func(t *testing.T) {
				a := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
				b := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url})
				var sig map[string]string
				if named {
					sig = map[string]string{"X-Contextd-Session": "pick-" + strings.ReplaceAll(name, "-", "")}
				}
				// A conversation of its own words on the shared database.
				task := "(" + t.Name() + ") "
				first, second := tc.first(false), tc.second(tc.kept)
				for _, body := range []map[string]any{first, second} {
					msgs := body["messages"].([]any)
					for i, m := range msgs {
						if mm := m.(map[string]any); mm["role"] == "user" && mm["content"] == pickTask {
							msgs[i] = map[string]any{"role": "user", "content": task + pickTask}
						}
					}
				}
				a.fake.Script(gatewaytest.Reply{Text: tc.script, More: tc.more}, gatewaytest.Reply{Text: `"level": "info"`})
				b.fake.Script(gatewaytest.Reply{Text: "done"})
				resp, raw := a.post(tc.path, first, sig)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("first: %d %s", resp.StatusCode, raw)
				}
				id := resp.Header.Get("X-Contextd-Session")
				a.waitLogLen(id, tc.logLen)
				resp, raw = a.post(tc.path, second, sig)
				if h := resp.Header.Get("X-Contextd-History"); resp.StatusCode != http.StatusOK || h != "extended" {
					t.Fatalf("second: %d history %q: %s", resp.StatusCode, h, raw)
				}
				a.waitLogLen(id, tc.logLen+2)
				second["messages"] = append(second["messages"].([]any), map[string]any{"role": "assistant", "content": `"level": "info"`},
					map[string]any{"role": "user", "content": "Thanks"})
				resp, raw = b.post(tc.path, second, sig)
				if h := resp.Header.Get("X-Contextd-History"); resp.StatusCode != http.StatusOK || h != "extended" {
					t.Fatalf("third, on the other replica: %d history %q: %s", resp.StatusCode, h, raw)
				}
				b.waitLogLen(id, tc.logLen+4)
				if n := len(b.logOf(id)); n != tc.logLen+4 {
					t.Errorf("the session's log holds %d messages, want %d", n, tc.logLen+4)
				}
			})
		}
	}
}
