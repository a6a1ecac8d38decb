package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// testFindCalls: FindCalls finds the live sessions of the tenant that hold
// a call, by its id; another tenant's and a deleted session's are not
// found; an id many sessions hold reads at most limit rows, and the ids
// before it do not use up its rows (a second session holding the last id
// is found when limit ids each have a row of the first).
func testFindCalls(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c", "gone"} {
		create(t, s, session("t", id, epoch))
	}
	create(t, s, session("other", "a", epoch))
	put := func(tenant, id string, calls ...store.ToolCall) {
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.PutToolCalls(ctx, tenant, id, calls) })
	}
	put("t", "a", store.ToolCall{CallID: "call_a1", Position: 2, ResultPosition: 3}, store.ToolCall{CallID: "call_0", Position: 4})
	put("t", "b", store.ToolCall{CallID: "call_b1", Position: 7}, store.ToolCall{CallID: "call_0", Position: 2})
	put("t", "c", store.ToolCall{CallID: "call_0", Position: 2})
	put("t", "gone", store.ToolCall{CallID: "call_g1", Position: 2})
	put("other", "a", store.ToolCall{CallID: "call_a1", Position: 9})
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "gone") })
	find := func(limit int, ids ...string) []string {
		t.Helper()
		hits, err := s.FindCalls(ctx, "t", ids, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hits {
			out = append(out, h.SessionID+":"+h.CallID)
		}
		slices.Sort(out)
		return out
	}
	if got, want := find(8, "call_a1", "call_b1"), []string{"a:call_a1", "b:call_b1"}; !slices.Equal(got, want) {
		t.Errorf("FindCalls(call_a1, call_b1) = %q, want %q", got, want)
	}
	if hits, _ := s.FindCalls(ctx, "t", []string{"call_b1"}, 8); len(hits) != 1 || hits[0].Position != 7 {
		t.Errorf("FindCalls(call_b1) = %+v, want session b at position 7", hits)
	}
	if got := find(8, "call_g1", "call_none"); len(got) != 0 {
		t.Errorf("a deleted session's call, an unknown id: %q, want none", got)
	}
	if got := find(2, "call_0"); len(got) != 2 {
		t.Errorf("an id three sessions hold, limit 2: %q, want 2 rows", got)
	}
	if got := find(8, "call_0"); len(got) != 3 {
		t.Errorf("an id three sessions hold: %q, want 3 rows", got)
	}
	// Eight calls of session d, the last of them also held by e: e's row
	// is read though d's rows alone are eight.
	create(t, s, session("t", "d", epoch))
	create(t, s, session("t", "e", epoch))
	var ids []string
	var calls []store.ToolCall
	for i := range 8 {
		id := "call_d" + string(rune('0'+i))
		ids = append(ids, id)
		calls = append(calls, store.ToolCall{CallID: id, Position: int64(2 + 2*i), ResultPosition: int64(3 + 2*i)})
	}
	put("t", "d", calls...)
	put("t", "e", store.ToolCall{CallID: ids[7], Position: 2})
	if got := find(8, ids...); !slices.Contains(got, "e:"+ids[7]) || len(got) != 9 {
		t.Errorf("FindCalls(8 ids of d, the last also e's, limit 8) = %q, want d's 8 rows and e:%s", got, ids[7])
	}
}
