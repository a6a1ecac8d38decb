package app

import (
	"strings"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/pgtest"
)

// TestSessionWarnings: a session's standing conditions reach GetSession and
// ListSessions rows as warnings, on both stores: an unknown model counted
// with the defaults, a view over the usable window, auto-compaction paused
// after a revert (until the next append). Before, only the usage of a
// GetSession carried the unknown model, and listings nothing.
func TestSessionWarnings(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{}
			if backend == "postgres" {
				env["CONTEXTD_DATABASE_URL"] = pgtest.URL(t)
			}
			client := contextdv1.NewContextServiceClient(startServer(t, env))
			ctx := t.Context()
			off := false
			for _, s := range []*contextdv1.CreateSessionRequest{
				{Id: "mystery", Model: "mystery-model-9000"},
				{Id: "full", Model: "gpt-4", Policy: &contextdv1.CompactionPolicy{AutoCompact: &off}},
				{Id: "reverted", Model: "gpt-4o"},
			} {
				if _, err := client.CreateSession(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "full", Messages: []*contextdv1.Message{user(strings.Repeat("word ", 9000))}}); err != nil {
				t.Fatal(err)
			}
			msgs := []*contextdv1.Message{user("Fix the build.")}
			for i := range 6 {
				msgs = append(msgs, toolStep(string(rune('a'+i)), strings.Repeat("output line\n", 400))...)
			}
			if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "reverted", Messages: msgs}); err != nil {
				t.Fatal(err)
			}
			target := 0.001
			c, err := client.Compact(ctx, &contextdv1.CompactRequest{SessionId: "reverted", Tier: contextdv1.CompactionTier_COMPACTION_TIER_PRUNE, Target: &target})
			if err != nil || c.GetCompaction() == nil {
				t.Fatalf("prune: %v, %v", c, err)
			}
			if _, err := client.RevertCompaction(ctx, &contextdv1.RevertCompactionRequest{SessionId: "reverted", CompactionId: c.GetCompaction().GetId()}); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"mystery": "not in the registry", "full": "does not fit", "reverted": "paused for this session until its next append: a compaction was just reverted"}
			list, err := client.ListSessions(ctx, &contextdv1.ListSessionsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range list.GetSessions() {
				got, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: s.GetId()})
				if err != nil {
					t.Fatal(err)
				}
				for from, ws := range map[string][]string{"ListSessions": s.GetWarnings(), "GetSession": got.GetSession().GetWarnings()} {
					if !strings.Contains(strings.Join(ws, "\n"), want[s.GetId()]) {
						t.Errorf("%s of %s: warnings %q; want one saying %q", from, s.GetId(), ws, want[s.GetId()])
					}
				}
			}
			if row := list.GetSessions()[0]; row.GetId() != "reverted" || row.GetLastCompaction().GetRevertedAt() == nil {
				t.Errorf("the reverted session's row: %v; want its last compaction with reverted_at", row.GetLastCompaction())
			}
		})
	}
}
