package gateway_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// qwenCompressionSystem stands for Qwen Code's compression system prompt,
// under which it sends its slimmed summary request.
const qwenCompressionSystem = "You are a summarization assistant. Produce a <state_snapshot> of the conversation."

// TestUnsignalledSlimmedSummaryRequest: Qwen Code's other summary request
// (its compression system prompt, its history with the image of a user
// message replaced by a placeholder, its directive) extends no session
// but keeps the session's latest calls: an aside of that session (nothing
// stored, the call in its ledger), sent upstream as the client sent it
// (no image, nothing of the session's view). Its answer is the session's
// summary: the compacted history that follows is recorded there, and one
// session holds the conversation. Before, the request was a fork: a
// session of its own for one call.
func TestUnsignalledSlimmedSummaryRequest(t *testing.T) {
	s := start(t, nil)
	c := newCompressingClient(t, s, "M")
	slim, last := c.slimmedRequest()
	summary := "Conversation M: the screenshot showed calc.py's failing tests; every file was read; add() is fixed."
	if h := c.send(slim, gatewaytest.Reply{Text: "<analysis>read</analysis><state_snapshot>" + summary + "</state_snapshot>"}); h != "aside" {
		t.Fatalf("the slimmed summary request: history %q, want aside", h)
	}
	reqs := s.fake.Requests()
	up := string(reqs[len(reqs)-1].Raw)
	if !strings.Contains(up, "You are a summarization assistant.") || !strings.Contains(up, "omitted for compaction") || strings.Contains(up, screenshotPNG) || strings.Count(up, "tool execution is disabled") != 1 {
		t.Errorf("upstream, want the request as the client sent it:\n%.3000s", up)
	}
	logs := s.sessionLogs()
	if len(logs) != 1 {
		t.Fatalf("%d sessions after the slimmed summary request, want 1", len(logs))
	}
	var id string
	for id = range logs {
		if all := strings.Join(logs[id], "\n"); strings.Contains(all, "state_snapshot> XML") || strings.Contains(all, "omitted for compaction") {
			t.Errorf("the session holds the summary request (an aside stores nothing):\n%s", all)
		}
	}
	s.checkLedger(id) // the aside's call is billed to the session
	// The compacted history keeps the call: recorded in the session.
	c.msgs = []any{c.msgs[0],
		map[string]any{"role": "user", "content": "<state_snapshot>" + summary + "</state_snapshot>\n\n" + qwenTrailer},
		call("Got it. Thanks for the additional context!", last),
		result(last, c.next-1),
	}
	if h := c.send(c.msgs, gatewaytest.Reply{Text: "Done."}); h != "compacted" {
		t.Errorf("the compacted history: %q, want compacted", h)
	}
	if n := len(s.sessionLogs()); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
	checkClientCompaction(t, s, id, "Fix the failing tests; the screenshot shows them.")
	s.checkUpstream()
	s.checkLedger(id)
}

// TestUnsignalledColdSummaryRequest: without an image or file in a user
// message Qwen Code's slimmed history is its history (a cut tool output is
// still its call's result), under its compression system prompt: the
// request extends the session and is an aside, answered from the view,
// nothing stored; the compacted history that follows is recorded there.
func TestUnsignalledColdSummaryRequest(t *testing.T) {
	s := start(t, nil)
	c := newCompressingClient(t, s, "K")
	c.rounds(5)
	last := c.callID(c.next - 1)
	cold := slices.Clone(c.msgs)
	cold[0] = map[string]any{"role": "system", "content": qwenCompressionSystem}
	cold = append(cold, map[string]any{"role": "tool", "tool_call_id": last, "content": "file4.go: cut\n[...truncated for compaction]"},
		map[string]any{"role": "user", "content": qwenDirective})
	summary := "Conversation K: every file was read under the compression prompt; add() is fixed."
	if h := c.send(cold, gatewaytest.Reply{Text: "<state_snapshot>" + summary + "</state_snapshot>"}); h != "aside" {
		t.Fatalf("the cold summary request: history %q, want aside", h)
	}
	c.msgs = []any{c.msgs[0],
		map[string]any{"role": "user", "content": "<state_snapshot>" + summary + "</state_snapshot>\n\n" + qwenTrailer},
		call("Got it. Thanks for the additional context!", last),
		result(last, c.next-1),
	}
	if h := c.send(c.msgs, gatewaytest.Reply{Text: "Done."}); h != "compacted" {
		t.Errorf("the compacted history: %q, want compacted", h)
	}
	if n := len(s.sessionLogs()); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
	s.checkUpstream()
}

// screenshotPNG is the image of the user message Qwen Code slims.
const screenshotPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

// slimmedRequest runs 6 tool rounds of a conversation whose first user
// message holds an image, and returns Qwen Code's slimmed summary request
// of it (its compression system prompt, the image replaced by a
// placeholder, the pending result, its directive) and the latest call.
func (c *compressingClient) slimmedRequest() (slim []any, last string) {
	c.t.Helper()
	c.msgs[1] = map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "Fix the failing tests; the screenshot shows them."},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + screenshotPNG}},
	}}
	c.rounds(6)
	// The latest call is found once it is stored (a few milliseconds after
	// it was relayed; Qwen Code runs the tool first).
	for id := range c.s.sessionLogs() {
		c.s.waitLogLen(id, 12)
	}
	last = c.callID(c.next - 1)
	slim = slices.Clone(c.msgs)
	slim[0] = map[string]any{"role": "system", "content": qwenCompressionSystem}
	slim[1] = map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "Fix the failing tests; the screenshot shows them."},
		map[string]any{"type": "text", "text": "[image/png omitted for compaction]"},
	}}
	return append(slim, result(last, c.next-1), map[string]any{"role": "user", "content": qwenDirective}), last
}

// TestSlimmedSummaryRequestGoesWithoutExpandTool: the slimmed summary
// request of a session whose policy exposes contextd_expand goes upstream
// as the client sent it, without the tool: its messages are not the
// session's view, and the tool would read the session's stored messages
// into it. Before, the tool went with it (PrepareResult.Tools kept).
func TestSlimmedSummaryRequestGoesWithoutExpandTool(t *testing.T) {
	s := start(t, nil)
	c := newCompressingClient(t, s, "E")
	slim, _ := c.slimmedRequest()
	for id := range s.sessionLogs() {
		s.rpc("UpdateSession", map[string]any{"sessionId": id, "updateMask": "policy", "policy": map[string]any{"exposeExpandTool": true}}, nil)
	}
	if h := c.send(slim, gatewaytest.Reply{Text: "<state_snapshot>Conversation E: every file was read.</state_snapshot>"}); h != "aside" {
		t.Fatalf("the slimmed summary request: history %q, want aside", h)
	}
	reqs := s.fake.Requests()
	if up := string(reqs[len(reqs)-1].Raw); strings.Contains(up, "contextd_expand") {
		t.Errorf("upstream, want the request as the client sent it, without contextd_expand:\n%.3000s", up)
	}
	s.checkUpstream()
}

// TestSlimmedSummaryRequestTeachesNothing: the slimmed summary request,
// sent as the client sent it, is not the session's view: its call goes
// into the session's ledger but neither anchors the session nor teaches
// the tenant's calibration of the model (a count of the same request in
// the tenant, before and after the call, is the same). Before, it was
// reported as the session's system prompt and tools and none of its view,
// then the request's own messages at a quarter token a byte: a sample of
// another count than the one calibrated, which moved the tenant's ratio
// (and, for an exactly counted model, was reported as the provider
// disagreeing with contextd's count).
func TestSlimmedSummaryRequestTeachesNothing(t *testing.T) {
	s := start(t, nil)
	const model = "llama-3.3-70b" // counted approximately: calibrated
	c := newCompressingClient(t, s, "T")
	c.model = model
	slim, _ := c.slimmedRequest()
	var id string
	for id = range s.sessionLogs() {
	}
	s.checkLedger(id)
	before := s.tenantCount(model, qwenCompressionSystem)
	if h := c.send(slim, gatewaytest.Reply{Text: "<state_snapshot>Conversation T: every file was read.</state_snapshot>"}); h != "aside" {
		t.Fatalf("the slimmed summary request: history %q, want aside", h)
	}
	s.checkLedger(id) // the aside's call is billed to the session
	if after := s.tenantCount(model, qwenCompressionSystem); after != before || !strings.HasSuffix(before, "CALIBRATED") {
		t.Errorf("the tenant's count of a request: %s before the slimmed summary request, %s after", before, after)
	}
}

// TestSlimmedSummaryRequestHeaders: the slimmed summary request goes
// upstream as the client sent it, so its answer carries nothing that says
// what contextd did to the session's view: no X-Contextd-Compacted, no
// X-Contextd-Used-Percent, none of the session's warnings (here "auto_compact
// is off", its window past the warning threshold), which are of a view
// that was not sent. Its history (aside) is. Before, the session's
// compaction status and warnings came with it.
func TestSlimmedSummaryRequestHeaders(t *testing.T) {
	s := start(t, nil)
	c := newCompressingClient(t, s, "H")
	slim, _ := c.slimmedRequest()
	for id := range s.sessionLogs() {
		s.rpc("UpdateSession", map[string]any{"sessionId": id, "updateMask": "policy", "policy": map[string]any{
			"autoCompact": false, "warningThreshold": 0.01, "criticalThreshold": 0.02, "emergencyThreshold": 0.03,
			"target": 0.002, "cacheTarget": 0.001}}, nil)
	}
	s.fake.Script(gatewaytest.Reply{Text: "<state_snapshot>Conversation H: every file was read.</state_snapshot>"})
	resp, out := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": slim}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the slimmed summary request: %d %s", resp.StatusCode, out)
	}
	if h := resp.Header.Get("X-Contextd-History"); h != "aside" {
		t.Fatalf("the slimmed summary request: history %q, want aside", h)
	}
	for _, name := range []string{"X-Contextd-Compacted", "X-Contextd-Used-Percent", "X-Contextd-Warning"} {
		if v := resp.Header.Values(name); len(v) > 0 {
			t.Errorf("the slimmed summary request's answer: %s %q, want none (the view was not sent)", name, v)
		}
	}
	s.checkUpstream()
}
