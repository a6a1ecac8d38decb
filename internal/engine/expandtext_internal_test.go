package engine

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/tokens"
)

// An original the store no longer has (retention purged it) is a note for
// the model, not a Go NotFound: the summary in hand names one stored
// original and one that is gone.
func TestExpandTextMissingOriginal(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := New(tokens.NewEncodings(), models, st)
	v, err := e.CreateSession(ctx, store.DefaultTenant, NewSession{Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	in := AppendInput{Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "hello"}}}}}
	out, err := e.AppendMessages(ctx, store.DefaultTenant, v.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	stored := out.Messages[0].ID
	for _, replaces := range [][]string{{stored, "msg_gone"}, {"msg_gone"}} {
		sum := chat.Message{ID: "sum_9_1", Role: chat.RoleUser, Kind: chat.KindSummary, Replaces: replaces}
		x, err := e.expandText(ctx, store.DefaultTenant, v.ID, &sum, expandArgs{id: sum.ID, length: 1000})
		if err != nil || !strings.Contains(x.problem, "no longer stored") {
			t.Errorf("%v: %+v, %v; want a note that the originals are gone", replaces, x, err)
		}
	}
}
