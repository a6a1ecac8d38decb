package app

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// heavy is a user message of about size bytes that costs few tokens: its
// bytes are in its metadata (kept, returned, never counted).
func heavy(size int, tag string) *contextdv1.Message {
	m := user("note " + tag)
	m.Metadata = map[string]string{"blob": strings.Repeat("z", size)}
	return m
}

// TestHostileView: a session's active view is bounded at append
// (CONTEXTD_MAX_VIEW_BYTES here 8 MB; issue 24: 30 appends of 7 MB made a
// 210 MB view on which every PrepareContext then took a minute and
// failed). Past the bound an append is FailedPrecondition naming the
// setting, over it alone InvalidArgument on messages, and either costs at
// most 3× an ordinary append of the same size and changes nothing. A page
// of GetMessages on a view of large messages costs at most 3× a page of the
// same bytes in small messages (it reads by a byte budget in the store, not
// page_size full rows). PrepareContext answers or refuses at once within
// CONTEXTD_MAX_RESPONSE_BYTES; Compact and CreateHandoff work on a view at
// the bound. On both stores.
func TestHostileView(t *testing.T) {
	const mb = 1 << 20
	env := map[string]string{"CONTEXTD_MAX_VIEW_BYTES": fmt.Sprint(8 * mb), "CONTEXTD_MAX_RESPONSE_BYTES": fmt.Sprint(mb)}
	onBothStores(t, env, func(t *testing.T, client contextdv1.ContextServiceClient) {
		ctx := t.Context()
		for _, id := range []string{"big", "small", "other"} {
			if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: id, Model: "gpt-4o"}); err != nil {
				t.Fatal(err)
			}
		}
		appendTo := func(id string, msgs ...*contextdv1.Message) error {
			_, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: id, Messages: msgs})
			return err
		}
		for i := range 7 {
			if err := appendTo("big", heavy(mb, fmt.Sprint(i))); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
		before, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "big"})
		if err != nil {
			t.Fatal(err)
		}
		ordinary := 0
		refused, err := allocated(t, func() error { return appendTo("big", heavy(mb, "over")) })
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "CONTEXTD_MAX_VIEW_BYTES") {
			t.Fatalf("an append past the view bound: %v; want FailedPrecondition naming CONTEXTD_MAX_VIEW_BYTES", err)
		}
		accepted, err := allocated(t, func() error {
			ordinary++
			return appendTo("other", heavy(mb, fmt.Sprint(ordinary)))
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("a refused 1 MB append allocates %.2f× an accepted one", float64(refused)/float64(accepted))
		if refused > 3*accepted {
			t.Errorf("a refused append allocates %d bytes, %.1f× an accepted one of the same size; want at most 3×", refused, float64(refused)/float64(accepted))
		}
		if err := appendTo("small", heavy(9*mb, "alone")); status.Code(err) != codes.InvalidArgument || fieldViolations(t, err)[0] != "messages" {
			t.Errorf("a 9 MB append, over the bound alone: %v; want InvalidArgument on messages", err)
		}
		after, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "big"})
		if err != nil || after.GetSession().GetVersion() != before.GetSession().GetVersion() || after.GetSession().GetLogCount() != 7 {
			t.Errorf("the session after refused appends: version %d → %d, %d messages (%v)",
				before.GetSession().GetVersion(), after.GetSession().GetVersion(), after.GetSession().GetLogCount(), err)
		}

		// A page by bytes: 1 MB from seven 1 MB messages costs about what 1
		// MB from a hundred 10 KB messages does.
		for i := range 100 {
			if err := appendTo("small", heavy(10_000, fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		page := func(id string, view contextdv1.MessageView) func() error {
			return func() error {
				_, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: id, View: view, PageSize: 100})
				return err
			}
		}
		for _, view := range []contextdv1.MessageView{contextdv1.MessageView_MESSAGE_VIEW_ACTIVE, contextdv1.MessageView_MESSAGE_VIEW_LOG} {
			bigCost, err := allocated(t, page("big", view))
			if err != nil {
				t.Fatal(err)
			}
			smallCost, err := allocated(t, page("small", view))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%v: a page of large messages allocates %.2f× a page of small ones", view, float64(bigCost)/float64(smallCost))
			if bigCost > 3*smallCost {
				t.Errorf("%v: a page of 1 MB messages allocates %d bytes, %.1f× a page of the same bytes in small messages; want at most 3×",
					view, bigCost, float64(bigCost)/float64(smallCost))
			}
		}

		// Everything that reads the whole view works at the bound.
		// PrepareContext answers the whole view: at 8 MB that is over
		// CONTEXTD_MAX_RESPONSE_BYTES (1 MB here), refused at once with
		// nothing changed, as it says.
		prepared := 0
		_, err = client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "big", Messages: []*contextdv1.Message{user("next")}})
		switch {
		case err == nil:
			prepared = 1
		case status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "CONTEXTD_MAX_RESPONSE_BYTES"):
			t.Errorf("PrepareContext at the bound: %v", err)
		}
		if _, err := client.CreateHandoff(ctx, &contextdv1.CreateHandoffRequest{SessionId: "big"}); err != nil {
			t.Errorf("CreateHandoff at the bound: %v", err)
		}
		if _, err := client.Compact(ctx, &contextdv1.CompactRequest{SessionId: "big", Tier: contextdv1.CompactionTier_COMPACTION_TIER_SUMMARIZE}); err != nil {
			t.Errorf("Compact at the bound: %v", err)
		}
		// Intact: every message and its metadata, paged through.
		var seen int
		for token := ""; ; {
			res, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "big", View: contextdv1.MessageView_MESSAGE_VIEW_LOG, PageToken: token})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range res.GetMessages() {
				if seen < 7 && len(m.GetMetadata()["blob"]) != mb {
					t.Errorf("message %d came back with %d bytes of metadata", seen, len(m.GetMetadata()["blob"]))
				}
				seen++
			}
			if token = res.GetNextPageToken(); token == "" {
				break
			}
		}
		if seen != 7+prepared {
			t.Errorf("the log pages through %d messages; want the 7 appended and %d prepared", seen, prepared)
		}
	})
}
