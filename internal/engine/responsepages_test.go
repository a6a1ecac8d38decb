package engine_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// compactionsOf reads every compaction of a session, page by page.
func compactionsOf(e *engine.Engine, ctx context.Context, tenant, id string) ([]store.Compaction, error) {
	var out []store.Compaction
	for token := ""; ; {
		page, err := e.ListCompactions(ctx, tenant, id, engine.Page{Token: token})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Compactions...)
		if token = page.Next; token == "" {
			return out, nil
		}
	}
}

// TestCompactionPagesAreByteBounded: with a small MaxResponseBytes, a page of
// ListCompactions holds one compaction (never none) whatever its page_size,
// and following the tokens reads every compaction once, oldest first; a
// foreign token is InvalidArgument naming page_token.
func TestCompactionPagesAreByteBounded(t *testing.T) {
	models, encodings := testModels(t)
	e := engine.New(encodings, models, openSQLite(t), engine.WithLimits(engine.Limits{MaxResponseBytes: 600}))
	ctx := t.Context()
	off := false
	v := agentSession(t, e, compaction.Overrides{AutoCompact: &off}, 16)
	low := 0.01
	var want []string
	for round := 0; round < 3; round++ {
		if round > 0 {
			msgs := []chat.Message{userMsg(fmt.Sprintf("round %d", round))}
			for i := 0; i < 6; i++ {
				id := fmt.Sprintf("call_%d_%d", round, i)
				msgs = append(msgs, callMsg(id), resultMsg(id, strings.Repeat("lorem ipsum dolor ", 100)))
			}
			if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: &low})
		if err != nil || res.Compaction == nil {
			t.Fatalf("round %d: %+v, %v", round, res, err)
		}
		want = append(want, res.Compaction.ID)
	}
	var got []string
	for token := ""; ; {
		page, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{Size: 100, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Compactions) != 1 {
			t.Fatalf("a page of %d compactions under a 600-byte cap; want exactly one", len(page.Compactions))
		}
		got = append(got, page.Compactions[0].ID)
		if token = page.Next; token == "" {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("paged %v; want %v", got, want)
	}
	if _, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{Token: "eDox"}); err == nil || !strings.Contains(err.Error(), "page_token") {
		t.Errorf("an ExpandMessage token: %v; want InvalidArgument naming page_token", err)
	}
}

// pageCountingStore is a real store that records how many compactions each
// ListCompactions read returned.
type pageCountingStore struct {
	store.Store
	reads []int
}

func (s *pageCountingStore) ListCompactions(ctx context.Context, tenant, id string, after, limit int) ([]store.Compaction, error) {
	out, err := s.Store.ListCompactions(ctx, tenant, id, after, limit)
	s.reads = append(s.reads, len(out))
	return out, err
}

// TestListCompactionsReadsOnePage: on both backends, a ListCompactions call
// reads one page and one compaction more from the store, never the whole
// listing, and the pages together are every compaction once, oldest first.
func TestListCompactionsReadsOnePage(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		counting := &pageCountingStore{Store: st}
		e := engine.New(encodings, models, counting)
		off := false
		v := agentSession(t, e, compaction.Overrides{AutoCompact: &off}, 4)
		low := 0.01
		var want []string
		for round := 0; round < 7; round++ {
			id := fmt.Sprintf("more_%d", round)
			if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{
				userMsg("go on"), callMsg(id), resultMsg(id, strings.Repeat("lorem ipsum dolor ", 100))}}); err != nil {
				t.Fatal(err)
			}
			res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: &low})
			if err != nil || res.Compaction == nil {
				t.Fatalf("round %d: %+v, %v", round, res, err)
			}
			want = append(want, res.Compaction.ID)
		}
		counting.reads = nil
		var got []string
		calls := 0
		for token := ""; ; calls++ {
			page, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{Size: 2, Token: token})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range page.Compactions {
				got = append(got, c.ID)
			}
			if token = page.Next; token == "" {
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("paged %v; want %v", got, want)
		}
		if len(counting.reads) != calls+1 {
			t.Errorf("%d store reads for %d calls", len(counting.reads), calls+1)
		}
		for i, n := range counting.reads {
			if n > 3 {
				t.Errorf("call %d read %d compactions from the store for a page of 2", i, n)
			}
		}
	})
}

// TestCompactionTokensAreBoundToTheSession: on both backends, a
// ListCompactions page token continues only the listing of the session it
// was issued for; one of another session, a forged one (a round the session
// never reached, another incarnation of the id) or one of the old
// unbound format is InvalidArgument naming page_token, not a silently
// shifted page.
func TestCompactionTokensAreBoundToTheSession(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := engine.New(encodings, models, st)
		off := false
		low := 0.01
		compacted := func() engine.SessionView {
			v := agentSession(t, e, compaction.Overrides{AutoCompact: &off}, 4)
			for round := 0; round < 3; round++ {
				id := fmt.Sprintf("more_%d", round)
				if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{
					userMsg("go on"), callMsg(id), resultMsg(id, strings.Repeat("lorem ipsum dolor ", 100))}}); err != nil {
					t.Fatal(err)
				}
				if res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: &low}); err != nil || res.Compaction == nil {
					t.Fatalf("round %d: %+v, %v", round, res, err)
				}
			}
			return v
		}
		a, b := compacted(), compacted()
		first, err := e.ListCompactions(ctx, tenant, a.ID, engine.Page{Size: 1})
		if err != nil || first.Next == "" {
			t.Fatalf("first page: %+v, %v", first, err)
		}
		if next, err := e.ListCompactions(ctx, tenant, a.ID, engine.Page{Size: 1, Token: first.Next}); err != nil || len(next.Compactions) != 1 || next.Compactions[0].Round != 2 {
			t.Errorf("the token on its own session: %+v, %v; want round 2", next, err)
		}
		own, err := e.ListCompactions(ctx, tenant, b.ID, engine.Page{Size: 1})
		if err != nil || own.Next == "" {
			t.Fatalf("first page of %s: %+v, %v", b.ID, own, err)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(own.Next)
		f := strings.SplitN(string(raw), ":", 4)
		forge := func(parts ...string) string {
			return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(parts, ":")))
		}
		for name, token := range map[string]string{
			"another session's":     first.Next,
			"a forged round":        forge(f[0], f[1], "99", b.ID),
			"round 0":               forge(f[0], f[1], "0", b.ID),
			"another incarnation's": forge(f[0], "12345", f[2], b.ID),
			"the old unbound form":  forge("c", f[1], f[2]),
			"not base64":            "*",
		} {
			_, err := e.ListCompactions(ctx, tenant, b.ID, engine.Page{Size: 1, Token: token})
			var invalid *chat.InvalidError
			if !errors.As(err, &invalid) || invalid.Violations[0].Field != "page_token" {
				t.Errorf("%s token: %v; want InvalidArgument naming page_token", name, err)
			}
		}
	})
}
