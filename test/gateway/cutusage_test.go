package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/app/apptest"
	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// sessionLedger is a session's ledger (all calls, and the estimated part)
// and its usage's source, once it holds at least calls calls (or after
// ten seconds).
func (s *server) sessionLedger(id string, calls int64) (all, estimated apptest.LedgerSum, source string) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		all, estimated = apptest.Ledgers(s.t, s.addr, id)
		if all.Calls >= calls || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var got struct {
		Session struct {
			Usage struct {
				Source string `json:"source"`
			} `json:"usage"`
		} `json:"session"`
	}
	s.rpc("GetSession", map[string]any{"sessionId": id}, &got)
	return all, estimated, got.Session.Usage.Source
}

// TestCutStreamUsage: a streamed answer the provider cuts after a few
// events was billed all the same (Anthropic bills the input its
// message_start reported); the gateway records it once, as an estimate:
// Anthropic's reported input, else contextd's own count of what it sent,
// and the output relayed counted with the session's encoding. The
// session's usage is not anchored to it, and the client's retry, which
// completes, is one more call (the provider's figures), never the cut one
// again. Before, the cut call was not in the ledger at all.
func TestCutStreamUsage(t *testing.T) {
	const question = "tell me, in a few words, what the answer to the great question of life is, and why"
	cases := []struct {
		door string
		path string
		body map[string]any
		// cut is the number of events the provider sends before it
		// drops the connection (a text delta among them).
		cut int
		// carriesInput: the stream reported the input before the cut
		// (Anthropic's message_start).
		carriesInput bool
	}{
		{"chat", "/v1/chat/completions", map[string]any{"model": "gpt-4o", "stream": true,
			"messages": []any{map[string]any{"role": "user", "content": question}}}, 3, false},
		{"responses", "/v1/responses", map[string]any{"model": "gpt-4o", "stream": true, "input": question}, 5, false},
		{"messages", "/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": true,
			"messages": []any{map[string]any{"role": "user", "content": question}}}, 3, true},
	}
	for _, c := range cases {
		t.Run(c.door, func(t *testing.T) {
			s := start(t, nil)
			answer := "forty two, as the computer said after seven and a half million years of thought"
			// 1. The stream is cut after c.cut events.
			s.fake.Set(func(f *gatewaytest.Fake) { f.DropAfter = c.cut })
			s.fake.Script(gatewaytest.Reply{Text: answer})
			resp, _, _ := s.send(c.path, c.body, nil)
			if resp == nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("cut stream: %v", resp)
			}
			id := resp.Header.Get("X-Contextd-Session")
			all, est, source := s.sessionLedger(id, 1)
			calls, got, estCalls, estimated := all.Calls, all.Bill, est.Calls, est.Bill
			if calls != 1 || estCalls != 1 || got != estimated {
				t.Fatalf("after the cut: ledger %d calls %+v, estimated %d calls %+v; want the one call, estimated", calls, got, estCalls, estimated)
			}
			reqs := s.fake.Requests()
			cutBill := reqs[len(reqs)-1].Bill
			if c.carriesInput {
				// The input is the provider's, as its message_start
				// reported it (and billed it: the fake bills so).
				if got.Uncached != cutBill.Uncached || got.CacheRead != cutBill.CacheRead || got.CacheWrite != cutBill.CacheWrite {
					t.Errorf("estimated input %+v, want the reported %+v", got, cutBill)
				}
			} else if cutBill != (gatewaytest.Bill{}) || got.Input() <= 0 {
				// OpenAI's usage comes last: the fake reported (and
				// billed) nothing; the input is contextd's own count.
				t.Errorf("estimated input %+v (the fake billed %+v): want contextd's own count", got, cutBill)
			}
			// The output is the text that came (a delta or two of the
			// answer): some, and less than the whole answer's.
			if got.Output < 1 || got.Output >= int64(len(answer)/4+1) {
				t.Errorf("estimated output %d, want the relayed part of the answer", got.Output)
			}
			if source == "ESTIMATE_SOURCE_ANCHORED" || source == "ESTIMATE_SOURCE_PROVIDER" {
				t.Errorf("the session's usage is %s after an estimate", source)
			}
			// 2. The client retries; the provider answers whole.
			s.fake.Set(func(f *gatewaytest.Fake) { f.DropAfter = 0 })
			s.fake.Script(gatewaytest.Reply{Text: answer})
			resp, body, err := s.send(c.path, c.body, nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("retry: %v %v %s", err, resp, body)
			}
			all, est, _ = s.sessionLedger(id, 2)
			calls, got, estCalls, estimated = all.Calls, all.Bill, est.Calls, est.Bill
			reqs = s.fake.Requests()
			whole := reqs[len(reqs)-1].Bill
			if calls != 2 || estCalls != 1 {
				t.Fatalf("after the retry: %d calls, %d estimated; want 2, 1", calls, estCalls)
			}
			exact := gatewaytest.Bill{Uncached: got.Uncached - estimated.Uncached, CacheRead: got.CacheRead - estimated.CacheRead,
				CacheWrite: got.CacheWrite - estimated.CacheWrite, Output: got.Output - estimated.Output}
			if exact != whole {
				t.Errorf("the retry's entry %+v, want the provider's %+v", exact, whole)
			}
			// Nothing more comes in later (no second record of the cut
			// call).
			time.Sleep(100 * time.Millisecond)
			if all, _, _ = s.sessionLedger(id, 2); all.Calls != 2 {
				t.Errorf("ledger calls %d, want 2", all.Calls)
			}
		})
	}
}

// TestClientCutStreamUsage: a client that goes away in the middle of a
// stream leaves a call the provider billed: it is recorded once, as an
// estimate (contextd's count of the request, the output relayed until
// the client left). Before, nothing was recorded.
func TestClientCutStreamUsage(t *testing.T) {
	s := start(t, nil)
	s.fake.Set(func(f *gatewaytest.Fake) { f.Pause = 200 * time.Millisecond })
	s.fake.Script(gatewaytest.Reply{Text: "a long answer that the client will not wait for, streamed slowly piece by piece"})
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "say something long"}}})
	req, _ := http.NewRequest(http.MethodPost, s.url("/v1/chat/completions"), bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", err, resp)
	}
	id := resp.Header.Get("X-Contextd-Session")
	// Read until the first piece of text came, then hang up.
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before its first text: %v", err)
		}
		if strings.Contains(line, `"content":"a `) {
			break
		}
	}
	resp.Body.Close()
	all, est, _ := s.sessionLedger(id, 1)
	calls, got, estCalls, estimated := all.Calls, all.Bill, est.Calls, est.Bill
	whole := s.fake.BilledTotals()
	if calls != 1 || estCalls != 1 || got != estimated || got.Input() <= 0 || got.Output < 1 || got.Output >= whole.Output {
		t.Fatalf("ledger %d calls %+v, estimated %d calls %+v; want the one call, estimated, a part of the whole answer's %d output tokens",
			calls, got, estCalls, estimated, whole.Output)
	}
	time.Sleep(300 * time.Millisecond)
	if all, _, _ = s.sessionLedger(id, 1); all.Calls != 1 {
		t.Errorf("ledger calls %d, want 1 (recorded once)", all.Calls)
	}
}

// TestExpandRoundCutStreamUsage: a round of the expand loop whose stream
// the provider cuts was billed too: it is in the ledger once, as an
// estimate, beside the calls the loop made before it. Before, the loop's
// cut round was left out.
func TestExpandRoundCutStreamUsage(t *testing.T) {
	s := start(t, nil)
	a := newChatAgent(s, false)
	id := expandSetup(t, s, a, bigOutput())
	before, _, _ := s.sessionLedger(id, 2)
	s.fake.Set(func(f *gatewaytest.Fake) { f.Expand, f.DropAfter = gatewaytest.ExpandOnce, 3 })
	resp, _, _ := s.send("/v1/chat/completions", map[string]any{"model": "gpt-4o", "stream": true, "messages": []any{
		map[string]any{"role": "system", "content": "You are terse."},
		map[string]any{"role": "user", "content": "What is in src?"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": lsCall.ID, "type": "function", "function": map[string]any{"name": lsCall.Name, "arguments": lsCall.Arguments}}}},
		map[string]any{"role": "tool", "tool_call_id": lsCall.ID, "content": bigOutput()},
		map[string]any{"role": "assistant", "content": "listed"},
		map[string]any{"role": "user", "content": "Show me that listing again."},
	}, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "ls", "parameters": map[string]any{"type": "object"}}}}}, nil)
	if resp == nil {
		t.Fatal("no answer")
	}
	all, est, _ := s.sessionLedger(id, before.Calls+1)
	if all.Calls != before.Calls+1 || est.Calls != 1 || est.Bill.Input() <= 0 {
		t.Errorf("ledger %d calls (%d before), estimated %d calls %+v; want the cut round, estimated", all.Calls, before.Calls, est.Calls, est.Bill)
	}
}
