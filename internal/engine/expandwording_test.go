package engine_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
)

// A session compacted in the ExpandMessage wording that becomes a gateway
// session (as one compacted before the gateway's wording existed): its
// stored texts keep their wording, so the view it sends, and the prompt
// cache's prefix, do not change; its next compaction writes the gateway's
// wording (the id alone) and its revert restores the view byte for byte
// (issue 29).
func TestGatewayWordingLeavesStoredViewsAlone(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, _ := expandSession(t, e, tenant, "", compaction.Overrides{}, 8)
		low := 0.05
		if c, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, Target: &low}); err != nil || !c.Compacted {
			t.Fatalf("summary: %+v, %v", c, err)
		}
		before, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(wire(before.Messages), "all ExpandMessage with message id sum_") {
			t.Fatalf("the API session's view is not in the ExpandMessage wording: %s", wire(before.Messages))
		}
		if _, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{engine.FieldLabels}, Labels: map[string]string{engine.GatewayLabel: "openai-chat"}}); err != nil {
			t.Fatal(err)
		}
		same, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
		if err != nil || wire(same.Messages) != wire(before.Messages) {
			t.Fatalf("the stored view changed with the label: %v\n%s\n%s", err, wire(before.Messages), wire(same.Messages))
		}
		if h := same.Cache; !h.FixedStable || h.StableMessages != int64(len(same.Messages)) || h.CompactionChangedFrom != -1 {
			t.Fatalf("the prompt cache's prefix moved with the label: %+v", h)
		}
		var more []chat.Message
		for i := 100; i < 116; i++ {
			id := fmt.Sprintf("call_%d", i)
			more = append(more, callMsg(id), resultMsg(id, fmt.Sprintf("step %d: %s", i, strings.Repeat("lorem ipsum dolor ", 90))))
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: more}); err != nil {
			t.Fatal(err)
		}
		grown, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		c, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune})
		if err != nil || !c.Compacted {
			t.Fatalf("prune: %+v, %v", c, err)
		}
		after, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		old, fresh := map[string]string{}, 0
		for _, m := range before.Messages {
			old[m.ID] = wire([]chat.Message{m})
		}
		for _, m := range after.Messages {
			w := wire([]chat.Message{m})
			if o, ok := old[m.ID]; ok {
				if o != w {
					t.Errorf("%s was rewritten: %s, then %s", m.ID, o, w)
				}
				continue
			}
			if m.Kind != chat.KindNormal {
				fresh++
				if strings.Contains(w, "ExpandMessage") || !strings.Contains(w, "Its id is ") {
					t.Errorf("new %s %s is not in the gateway's wording: %s", m.Kind, m.ID, w)
				}
			}
		}
		if fresh == 0 {
			t.Fatalf("the prune wrote no placeholder: %s", wire(after.Messages))
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, c.Compaction.ID); err != nil {
			t.Fatal(err)
		}
		reverted, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil || wire(reverted.Messages) != wire(grown.Messages) {
			t.Fatalf("revert: %v\n%s\n%s", err, wire(grown.Messages), wire(reverted.Messages))
		}
	})
}

// wire is messages as compared: ids, kinds and parts, byte for byte.
func wire(msgs []chat.Message) string {
	type m struct {
		ID    string
		Kind  chat.Kind
		Parts []chat.Part
	}
	out := make([]m, len(msgs))
	for i, x := range msgs {
		out[i] = m{x.ID, x.Kind, x.Parts}
	}
	b, _ := json.Marshal(out)
	return string(b)
}
