package gateway_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestProviderCompactionRewound: after a turn answered with a compaction
// block (the messages before it recorded as dropped by the provider,
// counting nothing), the client rewinds to before the block (Claude
// Code's rewind, an edited prompt): its history no longer holds the
// block, or the client keeps the block's message without the block: the
// provider reads every message again, and the session the request lands
// in counts them — its view's own count (not only the used figure, which
// the provider's report anchors) is the provider's, and no message stays
// pinned by the drop. Without the fix the stripped case kept the three
// messages before the block at 0 tokens, pinned: the view counted 57
// tokens where the provider read 2,256, and contextd could never compact
// them.
func TestProviderCompactionRewound(t *testing.T) {
	for _, how := range []string{"rewind", "stripped"} {
		t.Run(how, func(t *testing.T) { providerCompactionRewound(t, how) })
	}
}

func providerCompactionRewound(t *testing.T, how string) {
	s := start(t, nil)
	const model = "claude-sonnet-4-5"
	var msgs []map[string]any
	session := ""
	post := func(turn int) string {
		t.Helper()
		resp, out := s.post("/v1/messages", map[string]any{"model": model, "max_tokens": 500, "messages": msgs}, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, out)
		}
		t.Logf("turn %d: session %s, history %q", turn, resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History"))
		if id := resp.Header.Get("X-Contextd-Session"); id != "" {
			session = id
		}
		return session
	}
	for turn := range 2 {
		compaction := ""
		if turn == 1 {
			compaction = "Summary: calc.py's add() is fixed."
		}
		s.fake.Script(gatewaytest.Reply{Text: fmt.Sprintf("turn %d done", turn), Compaction: compaction})
		msgs = append(msgs, anText("user", fmt.Sprintf("Turn %d: here is the output.\n%s", turn, bigResult(turn))))
		post(turn)
		content := []map[string]any{{"type": "text", "text": fmt.Sprintf("turn %d done", turn)}}
		if compaction != "" {
			content = append([]map[string]any{{"type": "compaction", "content": compaction}}, content...)
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": content})
	}
	s.fake.Script(gatewaytest.Reply{Text: "turn 2 done"})
	msgs = append(msgs, anText("user", "Turn 2: now mul()."))
	post(2) // records the messages before the block as dropped
	if u := s.used(session, 6); u > 1000 {
		t.Fatalf("the block's drop was not recorded: %d tokens used", u)
	}

	switch how {
	case "rewind":
		// Rewind to before the block: the client's history is turn 0's
		// exchange and turn 1's prompt, edited.
		msgs = append(msgs[:2], anText("user", "Turn 1: instead, look at mul() first.\n"+bigResult(1)))
	case "stripped":
		// The client keeps the block's message without the block.
		msgs[3] = anText("assistant", "turn 1 done")
		msgs = append(msgs, anText("assistant", "turn 2 done"), anText("user", "Turn 3: and div()."))
	}
	s.fake.Script(gatewaytest.Reply{Text: "turn 1b done"})
	post(3)
	reqs := s.fake.Requests()
	bill := reqs[len(reqs)-1].Bill.Input()
	if used := s.used(session, len(msgs)+1); math.Abs(float64(used-bill)) > max(0.01*float64(bill), 12) {
		t.Errorf("after the %s: used %d tokens; the provider counted %d", how, used, bill)
	}
	// The view's own count, not the used figure the provider's report
	// anchors: every message counts again (within the fake's rule of
	// counting), and those the drop pinned are not.
	var view int64
	for i, m := range s.messagesOf(session, "MESSAGE_VIEW_ACTIVE") {
		view += m.Tokens
		if i < 3 && (m.Tokens == 0 || m.Pinned) {
			t.Errorf("view message %d %s (%s) counts %d tokens, pinned %v", i, m.ID, m.Role, m.Tokens, m.Pinned)
		}
	}
	if view < bill*8/10 {
		t.Errorf("after the %s: the view counts %d tokens; the provider counted %d", how, view, bill)
	}
	s.checkUpstream()
}

// TestProviderCompactionMoves: a second compaction block, later in the
// conversation, moves the point the provider reads from: the messages
// between the two blocks (the first block's message included) are
// recorded as dropped too, each once — two records of tier
// provider_compaction, the first of 3 messages and the second of the 4
// after them, a view of exactly the client's messages, every one before
// the second block counting nothing — and the used count is the
// provider's.
func TestProviderCompactionMoves(t *testing.T) {
	s := start(t, nil)
	var msgs []map[string]any
	session := ""
	for turn := range 6 {
		compaction := ""
		if turn == 1 || turn == 3 {
			compaction = fmt.Sprintf("Summary %d: calc.py's add() is fixed.", turn)
		}
		s.fake.Script(gatewaytest.Reply{Text: fmt.Sprintf("turn %d done", turn), Compaction: compaction})
		msgs = append(msgs, anText("user", fmt.Sprintf("Turn %d: here is the output.\n%s", turn, bigResult(turn))))
		resp, out := s.post("/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 500, "messages": msgs}, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, out)
		}
		if id := resp.Header.Get("X-Contextd-Session"); id != "" {
			session = id
		}
		content := []map[string]any{{"type": "text", "text": fmt.Sprintf("turn %d done", turn)}}
		if compaction != "" {
			content = append([]map[string]any{{"type": "compaction", "content": compaction}}, content...)
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": content})
	}
	reqs := s.fake.Requests()
	bill := reqs[len(reqs)-1].Bill.Input()
	if used := s.used(session, len(msgs)); math.Abs(float64(used-bill)) > max(0.01*float64(bill), 12) {
		t.Errorf("used %d tokens; the provider counted %d", used, bill)
	}
	view := s.messagesOf(session, "MESSAGE_VIEW_ACTIVE")
	if len(view) != len(msgs) {
		t.Fatalf("view of %d messages, the client has %d", len(view), len(msgs))
	}
	seen := map[string]bool{}
	for i, m := range view {
		if seen[m.ID] {
			t.Errorf("view message %d (%s) twice", i, m.ID)
		}
		seen[m.ID] = true
		// The second block is in message 7 (turn 3's answer).
		if dropped := i < 7; dropped != (m.Tokens == 0) {
			t.Errorf("view message %d (%s %s) counts %d tokens", i, m.Role, m.ID, m.Tokens)
		}
	}
	var comps struct {
		Compactions []struct {
			Tiers []string `json:"tiers"`
			Items []struct {
				NewID string `json:"newId"`
			} `json:"items"`
		} `json:"compactions"`
	}
	s.rpc("ListCompactions", map[string]any{"sessionId": session}, &comps)
	var sizes []int
	for _, c := range comps.Compactions {
		if len(c.Tiers) != 1 || c.Tiers[0] != "provider_compaction" {
			t.Errorf("a compaction of tiers %v", c.Tiers)
		}
		sizes = append(sizes, len(c.Items))
	}
	if fmt.Sprint(sizes) != "[3 4]" && fmt.Sprint(sizes) != "[4 3]" {
		t.Errorf("records of %v messages; want one of 3, one of 4", sizes)
	}
	s.checkUpstream()
}

// TestProviderCompactionCallTeachesNothing: the call the provider answers
// with a compaction block reports (as Anthropic's API does: the
// compaction's iteration is left out of the top-level usage) the input of
// the compacted request — the system prompt and the summary — not of the
// request contextd sent. It goes into the ledger but neither anchors the
// session nor teaches the tenant's calibration of the model: a count of
// the same request in the tenant, before and after the call, is the same.
// Without it, with a system prompt large enough that the report was above
// half of contextd's count, the sample moved the tenant's ratio for every
// session of the model.
func TestProviderCompactionCallTeachesNothing(t *testing.T) {
	s := start(t, nil)
	const model = "claude-sonnet-4-5"
	system := bigResult(7) + bigResult(8) + bigResult(10) + bigResult(11)
	probe := func() string { return s.tenantCount(model, system) }
	var msgs []map[string]any
	session := ""
	var before string
	for turn := range 2 {
		compaction := ""
		if turn == 1 {
			compaction = "Summary: calc.py's add() is fixed."
			before = probe()
		}
		s.fake.Script(gatewaytest.Reply{Text: fmt.Sprintf("turn %d done", turn), Compaction: compaction})
		msgs = append(msgs, anText("user", fmt.Sprintf("Turn %d: here is the output.\n%s", turn, bigResult(turn))))
		resp, out := s.post("/v1/messages", map[string]any{"model": model, "max_tokens": 500, "system": system, "messages": msgs}, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, out)
		}
		if id := resp.Header.Get("X-Contextd-Session"); id != "" {
			session = id
		}
		msgs = append(msgs, anText("assistant", fmt.Sprintf("turn %d done", turn)))
		s.used(session, len(msgs))
	}
	if after := probe(); after != before || !strings.HasSuffix(before, "CALIBRATED") {
		t.Errorf("the tenant's count of a request: %s before the compacting call, %s after", before, after)
	}
}

// tenantCount is the tenant's count of one request of model (system, and
// a user message of 4 KB), and its estimate's source: what a call that
// teaches the tenant's calibration of the model changes.
func (s *server) tenantCount(model, system string) string {
	s.t.Helper()
	var out struct {
		Usage struct {
			Used   string `json:"usedTokens"`
			Source string `json:"estimateSource"`
		} `json:"usage"`
	}
	s.rpc("GetContextUsage", map[string]any{"inline": map[string]any{"model": model, "systemPrompt": system,
		"messages": []map[string]any{{"role": "ROLE_USER", "parts": []map[string]any{{"text": map[string]any{"text": bigResult(9)}}}}}}}, &out)
	return out.Usage.Used + " " + out.Usage.Source
}
