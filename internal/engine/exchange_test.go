package engine_test

import (
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

func replyMsg(text string) chat.Message {
	return chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
}

// onePreparedTurn is a session of e with one user turn prepared: what a
// model call's recording follows.
func onePreparedTurn(t *testing.T, e *engine.Engine) (engine.SessionView, engine.PrepareResult) {
	t.Helper()
	v, err := e.CreateSession(t.Context(), tenant, engine.NewSession{Model: "gpt-4o", System: "sys"})
	if err != nil {
		t.Fatal(err)
	}
	prep, err := e.PrepareContext(t.Context(), tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("hello there")}})
	if err != nil {
		t.Fatal(err)
	}
	return v, prep
}

// TestRecordExchangeIsOneTransaction: a relayed call's usage reports and
// its reply are recorded in one transaction, both or neither; a reply
// whose session's log grew meanwhile (its own retry, or a request that
// carried it) is not appended, its reports are.
func TestRecordExchangeIsOneTransaction(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		txs := 0
		e := engine.New(encodings, models, countTxs{st, &txs})
		v, prep := onePreparedTurn(t, e)
		used := prep.Status.Usage.Used
		in := engine.ExchangeInput{
			Reports: []engine.ReportInput{{InputTokens: used, OutputTokens: 5, ViewToken: prep.ViewToken},
				{InputTokens: used + 3, OutputTokens: 2, ViewToken: prep.ViewToken, AddedLocalTokens: 3}},
			Reply: []chat.Message{replyMsg("hi")}, LogCount: prep.Status.LogCount, Created: prep.Status.Created,
			Model: prep.Status.Usage.Model}

		// A report that fails in the transaction (a message count past the
		// view) stores nothing of the exchange.
		bad := in
		n := int64(99)
		bad.Reports = append([]engine.ReportInput{{InputTokens: 10, MessageCount: &n}}, in.Reports...)
		if _, err := e.RecordExchange(ctx, tenant, v.ID, bad); err == nil {
			t.Fatal("an exchange with a bad report was recorded")
		}
		s, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.Version != prep.Status.Version || s.LogCount != 1 || s.Ledger.Calls.Calls != 0 {
			t.Fatalf("after a failed exchange: version %d (was %d), %d logged, %d calls", s.Version, prep.Status.Version, s.LogCount, s.Ledger.Calls.Calls)
		}

		txs = 0
		out, err := e.RecordExchange(ctx, tenant, v.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		if txs != 1 || len(out.Reply) != 1 || out.Reply[0].Position != 2 {
			t.Fatalf("exchange: %d transactions, reply %+v", txs, out.Reply)
		}
		s, err = e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.LogCount != 2 || s.Ledger.Calls.Calls != 2 || s.Version != out.Version {
			t.Fatalf("after the exchange: %d logged, %d calls, version %d (answered %d)", s.LogCount, s.Ledger.Calls.Calls, s.Version, out.Version)
		}

		// The same exchange again: the log grew since the call, so its
		// reports are recorded and its reply is not appended twice.
		out, err = e.RecordExchange(ctx, tenant, v.ID, in)
		if err != nil || out.Reply != nil {
			t.Fatalf("the same exchange again: %+v, %v", out, err)
		}
		s, err = e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.LogCount != 2 || s.Ledger.Calls.Calls != 4 {
			t.Fatalf("after the exchange again: %d logged, %d calls; want 2 and 4", s.LogCount, s.Ledger.Calls.Calls)
		}
	})
}

// TestRecordExchangeLeavesOutUnrecordableReports: a provider's usage block
// the ledger cannot take (no input tokens) is left out and said so; the
// reply and the other calls' reports are recorded. Before the fix the
// whole exchange failed and the reply was not stored, where the gateway's
// separate ReportUsage and AppendMessages had stored it.
func TestRecordExchangeLeavesOutUnrecordableReports(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, prep := onePreparedTurn(t, e)
		in := engine.ExchangeInput{
			Reports: []engine.ReportInput{{InputTokens: 0, OutputTokens: 5, ViewToken: prep.ViewToken},
				{InputTokens: prep.Status.Usage.Used, OutputTokens: 2, ViewToken: prep.ViewToken}},
			Reply: []chat.Message{replyMsg("hi")}, LogCount: prep.Status.LogCount, Created: prep.Status.Created,
			Model: prep.Status.Usage.Model}
		out, err := e.RecordExchange(ctx, tenant, v.ID, in)
		if err != nil {
			t.Fatalf("an exchange with a usage block of no input: %v", err)
		}
		if len(out.Reply) != 1 || len(out.Dropped) != 1 {
			t.Fatalf("reply %+v, dropped %q; want the reply and one dropped report", out.Reply, out.Dropped)
		}
		s, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.LogCount != 2 || s.Ledger.Calls.Calls != 1 {
			t.Fatalf("after the exchange: %d logged, %d calls; want 2 and 1", s.LogCount, s.Ledger.Calls.Calls)
		}
	})
}

// TestRecordExchangeKeepsTheBillOfARefusedReply: a reply the log refuses
// (here invalid; at the gateway, one past the append caps, as an expand
// loop's 16 MB answer was) is left out and said so, and the call's usage
// is recorded all the same — the provider billed it. Before, the refusal
// failed the whole exchange and the ledger lost every call of it.
func TestRecordExchangeKeepsTheBillOfARefusedReply(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, prep := onePreparedTurn(t, e)
		in := engine.ExchangeInput{
			Reports:  []engine.ReportInput{{InputTokens: prep.Status.Usage.Used, OutputTokens: 2, ViewToken: prep.ViewToken}},
			Reply:    []chat.Message{{Role: "narrator", Parts: []chat.Part{{Type: chat.PartText, Text: "hi"}}}},
			LogCount: prep.Status.LogCount, Created: prep.Status.Created, Model: prep.Status.Usage.Model}
		out, err := e.RecordExchange(ctx, tenant, v.ID, in)
		if err != nil {
			t.Fatalf("an exchange whose reply the log refuses: %v", err)
		}
		if out.Reply != nil || len(out.Dropped) != 1 {
			t.Fatalf("reply %+v, dropped %q; want no reply and the reply dropped", out.Reply, out.Dropped)
		}
		s, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.LogCount != 1 || s.Ledger.Calls.Calls != 1 {
			t.Fatalf("after the exchange: %d logged, %d calls; want 1 and 1", s.LogCount, s.Ledger.Calls.Calls)
		}
		// With nothing to bill, a refused reply is the exchange's error.
		in.Reports = nil
		if _, err := e.RecordExchange(ctx, tenant, v.ID, in); err == nil {
			t.Fatal("a refused reply alone was not refused")
		}
	})
}

// TestRecordExchangeSkipsAReplayedReport: a usage report whose idempotency
// key was recorded before is not recorded again — the exchange answers a
// warning, the ledger keeps one call. Before, the replayed report (which
// has nothing to record) was kept, and its recording after the commit
// called a nil function: a panic.
func TestRecordExchangeSkipsAReplayedReport(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, prep := onePreparedTurn(t, e)
		rep := engine.ReportInput{InputTokens: prep.Status.Usage.Used, OutputTokens: 5, ViewToken: prep.ViewToken, IdempotencyKey: "call-1"}
		if _, err := e.ReportUsage(ctx, tenant, v.ID, rep); err != nil {
			t.Fatal(err)
		}
		out, err := e.RecordExchange(ctx, tenant, v.ID, engine.ExchangeInput{Reports: []engine.ReportInput{rep},
			LogCount: prep.Status.LogCount, Created: prep.Status.Created, Model: prep.Status.Usage.Model})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Warnings) == 0 {
			t.Error("a replayed report was taken without a warning")
		}
		s, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.Ledger.Calls.Calls != 1 {
			t.Errorf("the ledger holds %d calls, want 1", s.Ledger.Calls.Calls)
		}
	})
}

// TestRecordExchangeEstimate: the gateway's report of a stream that ended
// before its usage is in the ledger's calls and in its estimated part:
// with no input carried, contextd's own count of the request; the output
// at least the relayed text counted with the session's encoding; carried
// figures as they are. Neither anchors the session, even one that
// undercuts contextd's count.
func TestRecordExchangeEstimate(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := engine.New(encodings, models, st)
		v, prep := onePreparedTurn(t, e)
		used := prep.Status.Usage.Used
		relayed := "Here is the first part of an answer that never"
		in := engine.ExchangeInput{LogCount: prep.Status.LogCount, Created: prep.Status.Created, Model: prep.Status.Usage.Model,
			Reports: []engine.ReportInput{{Estimated: true, RelayedText: relayed, ViewToken: prep.ViewToken},
				{Estimated: true, InputTokens: 7, CacheReadTokens: 2, OutputTokens: 1, ViewToken: prep.ViewToken}}}
		if _, err := e.RecordExchange(ctx, tenant, v.ID, in); err != nil {
			t.Fatal(err)
		}
		s, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		l := s.Ledger
		counted := l.Estimated.Input - 7
		if l.Calls != l.Estimated || l.Estimated.Calls != 2 || counted < used || counted > used+8 || l.Estimated.CacheRead != 2 {
			t.Errorf("ledger %+v; want two estimated calls, the first's input contextd's count of %d", l, used)
		}
		if out := l.Estimated.Output - 1; out < 5 || out > int64(len(relayed)/2) {
			t.Errorf("estimated output %d, want the relayed text's tokens", out)
		}
		if s.Usage.Source == engine.SourceAnchored || s.Usage.Used != used {
			t.Errorf("usage %v, %d tokens after estimates; want contextd's own count %d", s.Usage.Source, s.Usage.Used, used)
		}
	})
}
