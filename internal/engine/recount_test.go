package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/telemetry"
)

// metricSum is the sum of a counter family's values on reg.
func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// toolBatch is n tool calls with results whose counts differ between
// cl100k_base and o200k_base, then a user message.
func toolBatch(tag string, n int, size int) []chat.Message {
	var msgs []chat.Message
	for i := range n {
		id := fmt.Sprintf("%s_%d", tag, i)
		msgs = append(msgs, callMsg(id), resultMsg(id, fmt.Sprintf("file %s: %s", id, strings.Repeat("日本語のテキストを要約してください。", size))))
	}
	return append(msgs, userMsg("Now summarize "+tag+"."))
}

func activeIDs(t *testing.T, e *engine.Engine, id string) map[string]bool {
	t.Helper()
	v, err := e.GetMessages(t.Context(), tenant, id, engine.ViewActive, engine.Page{Size: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range v.Messages {
		ids[m.ID] = true
	}
	return ids
}

// TestRevertRecountsOnlyStaleCounts checks that a revert tokenizes only the
// restored messages whose stored count was made for another encoding: a
// ClearMessages reverted without a model change in between tokenizes
// nothing (the tokens-counted and messages-recounted counters do not move),
// and the compaction from before a model change recounts exactly the
// messages it restores, which then agree with a full recount.
func TestRevertRecountsOnlyStaleCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg, func() float64 { return 0 })
	backendsWith(t, []engine.Option{engine.WithMetrics(metrics)}, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		off := false
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", Policy: compaction.Overrides{AutoCompact: &off}}) // cl100k_base
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: append([]chat.Message{userMsg("Translate the files.")}, toolBatch("a", 8, 40)...)}); err != nil {
			t.Fatal(err)
		}
		low := 0.05
		c1, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Target: &low})
		if err != nil || !c1.Compacted {
			t.Fatalf("compact: %+v, %v", c1, err)
		}
		if _, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{"model"}, Model: "gpt-4o"}); err != nil { // o200k_base
			t.Fatal(err)
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: toolBatch("b", 4, 40)}); err != nil {
			t.Fatal(err)
		}
		before, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		cleared, err := e.ClearMessages(ctx, tenant, v.ID, false, nil)
		if err != nil || cleared.Compaction == nil {
			t.Fatalf("clear: %+v, %v", cleared, err)
		}
		tokens0 := metricSum(t, reg, "contextd_tokens_counted_total")
		recounted0 := metricSum(t, reg, "contextd_messages_recounted_total")
		back, err := e.RevertCompaction(ctx, tenant, v.ID, cleared.Compaction.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d := metricSum(t, reg, "contextd_tokens_counted_total") - tokens0; d != 0 {
			t.Errorf("reverting a clear without a model change tokenized %v tokens", d)
		}
		if d := metricSum(t, reg, "contextd_messages_recounted_total") - recounted0; d != 0 {
			t.Errorf("reverting a clear without a model change recounted %v messages", d)
		}
		if back.ActiveTokens != before.ActiveTokens {
			t.Errorf("reverted clear counts %d tokens; before the clear %d", back.ActiveTokens, before.ActiveTokens)
		}

		// Reverting c1 restores what it replaced, counted for gpt-4.
		inView := activeIDs(t, e, v.ID)
		restored := 0
		for _, id := range c1.Compaction.ViewBefore {
			if !inView[id] {
				restored++
			}
		}
		if restored == 0 {
			t.Fatal("the compaction replaced nothing")
		}
		recounted0 = metricSum(t, reg, "contextd_messages_recounted_total")
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, c1.Compaction.ID); err != nil {
			t.Fatal(err)
		}
		if d := metricSum(t, reg, "contextd_messages_recounted_total") - recounted0; d != float64(restored) {
			t.Errorf("the revert recounted %v messages; it restored %d counted for another encoding", d, restored)
		}
		checkFullRecount(t, e, v.ID)
	})
}

// TestRevertSurvivesACounterThatRefuses checks that a revert never fails
// for counting: after a model change, an engine whose count limit is below
// one restored message still reverts, that message keeps its old count,
// and the others are counted for the new model.
func TestRevertSurvivesACounterThatRefuses(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := engine.New(encodings, models, s)
		off := false
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", Policy: compaction.Overrides{AutoCompact: &off}})
		if err != nil {
			t.Fatal(err)
		}
		msgs := append([]chat.Message{userMsg("Translate the files.")}, toolBatch("a", 6, 10)...)
		msgs[2] = resultMsg("a_0", strings.Repeat("巨大な出力。", 2000)) // ~36 KB, over the limit below
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		huge, oldCount := log.Messages[2].ID, log.Messages[2].Tokens
		cleared, err := e.ClearMessages(ctx, tenant, v.ID, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{"model"}, Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
		strict := engine.New(encodings, models, s, engine.WithLimits(engine.Limits{MaxCountBytes: 8 << 10}))
		if _, err := strict.RevertCompaction(ctx, tenant, v.ID, cleared.Compaction.ID); err != nil {
			t.Fatalf("revert with a counter that refuses one message: %v", err)
		}
		after, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(after.Messages) != len(log.Messages) {
			t.Fatalf("reverted view has %d messages; want %d", len(after.Messages), len(log.Messages))
		}
		changed := 0
		for i, m := range after.Messages {
			switch {
			case m.ID == huge && m.Tokens != oldCount:
				t.Errorf("the refused message's count became %d; it keeps %d", m.Tokens, oldCount)
			case m.ID != huge && m.Tokens != log.Messages[i].Tokens:
				changed++
			}
		}
		if changed == 0 {
			t.Error("no other restored message was recounted for gpt-4o")
		}
	})
}

// checkFullRecount checks that a gpt-4o session's active tokens agree with
// a full recount of its view for gpt-4o (a switch to gpt-4 and back).
func checkFullRecount(t *testing.T, e *engine.Engine, id string) {
	t.Helper()
	ctx := t.Context()
	reverted, err := e.GetSession(ctx, tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.UpdateSession(ctx, tenant, id, engine.SessionUpdate{Mask: []string{"model"}, Model: "gpt-4"}); err != nil {
		t.Fatal(err)
	}
	ref, err := e.UpdateSession(ctx, tenant, id, engine.SessionUpdate{Mask: []string{"model"}, Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	if reverted.ActiveTokens != ref.ActiveTokens {
		t.Errorf("reverted view counts %d tokens; a full recount for gpt-4o says %d", reverted.ActiveTokens, ref.ActiveTokens)
	}
}
