package app

import (
	"strings"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestNothingToCompactSaysWhy: Compact and its dry run on a session with
// nothing to do answer with a reason and the figures: below the target; an
// empty view; every message kept (pinned, the task, the latest user turn).
// Before, the answer was a bare "nothing to compact".
func TestNothingToCompactSaysWhy(t *testing.T) {
	client := contextdv1.NewContextServiceClient(startServer(t, map[string]string{}))
	ctx := t.Context()
	create := func(id string) {
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: id, Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
	}
	compact := func(id string, dry bool, target *float64) *contextdv1.CompactResponse {
		t.Helper()
		resp, err := client.Compact(ctx, &contextdv1.CompactRequest{SessionId: id, DryRun: dry, Target: target})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetCompaction() != nil {
			t.Fatalf("%s: compacted %v; want nothing to compact", id, resp.GetCompaction())
		}
		return resp
	}
	create("empty")
	for _, dry := range []bool{true, false} {
		if r := compact("empty", dry, nil); r.GetNothingReason() != contextdv1.NothingToCompact_NOTHING_TO_COMPACT_EMPTY || !strings.Contains(r.GetNothingDetail(), "empty") {
			t.Errorf("empty view (dry run %v): %v %q", dry, r.GetNothingReason(), r.GetNothingDetail())
		}
	}
	create("small")
	if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "small", Messages: []*contextdv1.Message{user("Fix the test."), {Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{text("Done.")}}}}); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		r := compact("small", dry, nil)
		if r.GetNothingReason() != contextdv1.NothingToCompact_NOTHING_TO_COMPACT_BELOW_TARGET || !strings.Contains(r.GetNothingDetail(), "at or below the target, 50 % of the usable window") {
			t.Errorf("below target (dry run %v): %v %q", dry, r.GetNothingReason(), r.GetNothingDetail())
		}
	}
	// Over a tiny target, but only the task and the latest user message,
	// both kept.
	tiny := 0.0001
	r := compact("small", false, &tiny)
	if r.GetNothingReason() != contextdv1.NothingToCompact_NOTHING_TO_COMPACT_ALL_KEPT || !strings.Contains(r.GetNothingDetail(), "all kept") {
		t.Errorf("all kept: %v %q", r.GetNothingReason(), r.GetNothingDetail())
	}
}
