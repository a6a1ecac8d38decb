package compaction_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// viewFrom builds a well-formed conversation from fuzz bytes: every byte
// picks the next step (user turn, assistant text, a tool step with one or
// more parallel calls, a pinned note) and its size.
func viewFrom(data []byte) []chat.Message {
	b := &builder{}
	b.user("the original task")
	call := 0
	for i := 0; i+1 < len(data); i += 2 {
		op, size := data[i]%5, int(data[i+1])*20
		switch op {
		case 0:
			b.user(strings.Repeat("u", size+1))
		case 1:
			b.assistant(strings.Repeat("a", size+1))
		case 2, 3:
			n := 1 + int(data[i])%3 // parallel calls
			var ids []string
			for k := 0; k < n; k++ {
				call++
				ids = append(ids, fmt.Sprintf("c%d", call))
			}
			b.assistant("step", ids...)
			for _, id := range ids {
				b.result(id, strings.Repeat("r", size+1))
			}
		case 4:
			b.add(chat.Message{Role: chat.RoleUser, Pinned: true, Parts: []chat.Part{{Type: chat.PartText, Text: strings.Repeat("p", size/4+1)}}})
		}
	}
	return b.msgs
}

// FuzzPlanner: for any conversation and policy, the planner either returns
// a plan (which it has validated) or says the request cannot fit; it never
// panics and never produces an invalid view.
func FuzzPlanner(f *testing.F) {
	f.Add([]byte{2, 200, 2, 200, 0, 10, 3, 255, 1, 50}, uint16(8000), uint8(65), uint8(65), uint8(30), uint8(3))
	f.Add([]byte{4, 255, 4, 255, 2, 1}, uint16(4000), uint8(70), uint8(85), uint8(50), uint8(0))
	f.Add([]byte{0, 1, 1, 1, 0, 1, 1, 1}, uint16(200), uint8(10), uint8(20), uint8(5), uint8(10))
	f.Add([]byte{3, 250, 3, 250, 3, 250, 3, 250, 3, 250, 3, 250}, uint16(6000), uint8(50), uint8(60), uint8(40), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, window uint16, warn, crit, target, protect uint8) {
		if len(data) > 400 {
			return
		}
		w := int64(window) + 500
		p := compaction.Defaults(w)
		p.WarningThreshold = float64(warn%100+1) / 100
		p.CriticalThreshold = max(p.WarningThreshold, float64(crit%100+1)/100)
		p.Target = float64(target%99+1) / 100
		p.ProtectRecentToolResults = int(protect % 8)
		req := request(&builder{msgs: viewFrom(data)}, w, compaction.AllTiers...)
		req.Policy, req.Target = p, p.Target
		plan, err := compaction.PlanCompaction(req)
		if err != nil {
			if !errors.Is(err, compaction.ErrTooLarge) {
				t.Fatalf("planner error: %v", err)
			}
			return
		}
		if err := compaction.Validate(req.View, plan.View, "m1"); err != nil {
			t.Fatalf("invalid plan: %v", err)
		}
		if plan.TokensAfter > w-p.ReservedOutputTokens {
			t.Fatalf("plan does not fit: %d > %d", plan.TokensAfter, w-p.ReservedOutputTokens)
		}
	})
}
