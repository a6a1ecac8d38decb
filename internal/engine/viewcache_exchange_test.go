package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// countViewReads is a real store that counts its reads of the active view
// outside transactions (what a view cache hit saves).
type countViewReads struct {
	store.Store
	n *int
}

func (s countViewReads) ActiveMessages(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, []int64, error) {
	*s.n++
	return s.Store.ActiveMessages(ctx, tenant, id, after, limit)
}

// TestViewCacheFollowsRecordedExchange: the view cache of the replica
// that records a gateway exchange (RecordExchange: the reply appended)
// moves to the version the recording committed, so the conversation's
// next PrepareContext on it reads no view; and whatever another replica
// writes — before the recording (its lock then finds a version the cache
// does not hold), or after it (a report, an append, a compaction) — the
// first replica's next PrepareContext answers the view as stored. On both
// stores. Breaking the guard (appended extending an entry of another
// version) makes the "written before the recording" step answer a view
// without the other replica's compaction; not extending the entry in
// RecordExchange makes the read count fail.
func TestViewCacheFollowsRecordedExchange(t *testing.T) {
	models, encodings := testModels(t)
	replicas(t, func(t *testing.T, _, b *engine.Engine, st store.Store) {
		ctx := t.Context()
		reads := 0
		a := engine.New(encodings, models, countViewReads{st, &reads})
		off := false
		v, err := a.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o", System: "You are a coding agent.",
			Policy: compaction.Overrides{AutoCompact: &off}})
		if err != nil {
			t.Fatal(err)
		}
		turn := 0
		// exchange is one gateway request on A: PrepareContext with the
		// user's new message, then the recording of its reply.
		exchange := func(what string) engine.PrepareResult {
			t.Helper()
			turn++
			prep, err := a.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{
				userMsg(fmt.Sprintf("step %d: %s", turn, what))}})
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			checkView(t, what+": PrepareContext", st, v.ID, prep.Messages)
			return prep
		}
		record := func(what string, prep engine.PrepareResult) {
			t.Helper()
			out, err := a.RecordExchange(ctx, tenant, v.ID, engine.ExchangeInput{
				Reports: []engine.ReportInput{{InputTokens: prep.Status.Usage.Used, OutputTokens: 5, ViewToken: prep.ViewToken}},
				Reply:   []chat.Message{replyMsg(fmt.Sprintf("answer %d", turn))}, LogCount: prep.Status.LogCount,
				Created: prep.Status.Created, Model: prep.Status.Usage.Model})
			if err != nil || out.Reply == nil {
				t.Fatalf("%s: recording %+v, %v", what, out, err)
			}
		}

		// The agent loop on one replica: after the first request, each
		// finds its view cached at the version the recording left.
		record("first", exchange("first"))
		for i := range 3 {
			reads = 0
			prep := exchange("loop")
			if reads != 0 {
				t.Fatalf("loop %d: PrepareContext after A's own recording read the view %d times, want 0 (cached)", i, reads)
			}
			record("loop", prep)
		}

		// B writes after A's recording: a report (version only), an
		// append, a compaction (a new view epoch).
		prep := exchange("before B's report")
		record("before B's report", prep)
		if _, err := b.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: 100, OutputTokens: 1}); err != nil {
			t.Fatal(err)
		}
		record("after B's report", exchange("after B's report"))
		if _, err := b.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("from B")}}); err != nil {
			t.Fatal(err)
		}
		record("after B's append", exchange("after B's append"))
		if _, err := b.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: ptr(0.01)}); err != nil {
			t.Fatal(err)
		}
		record("after B's compaction", exchange("after B's compaction"))

		// B writes between A's PrepareContext and A's recording: the
		// recording locks a version A's cache does not hold, and must not
		// extend it.
		for _, write := range []string{"report", "append", "compaction"} {
			prep := exchange("before B's " + write + " in between")
			switch write {
			case "report":
				_, err = b.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: 100, OutputTokens: 1})
			case "append":
				_, err = b.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("from B, in between")}})
			case "compaction":
				// The view grows first so that a prune has something to do.
				if _, err = b.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{callMsg("x" + write), resultMsg("x"+write, "output of B's tool call")}}); err == nil {
					_, err = b.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: ptr(0.01)})
				}
			}
			if write != "report" {
				// The log grew: A's reply would no longer be where its
				// call left it; record at the log B left.
				s, err := b.GetSession(ctx, tenant, v.ID)
				if err != nil {
					t.Fatal(err)
				}
				prep.Status.LogCount = s.LogCount
			}
			if err != nil {
				t.Fatal(err)
			}
			record("B's "+write+" in between", prep)
			exchange("after B's " + write + " in between")
		}
	})
}

// checkView compares a view answered with the one stored.
func checkView(t *testing.T, what string, st store.Store, id string, got []chat.Message) {
	t.Helper()
	stored, _, err := st.ActiveMessages(t.Context(), tenant, id, 0, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	sameMessages(t, what, got, stored)
}
