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

// TestPageTokensAreBound: on both backends, a page token of
// ListCompactions, GetMessages (either view) or ExpandMessage continues only
// the listing it was issued for; one of another session, another listing,
// another message, a forged position or an older token format is
// InvalidArgument naming page_token, not a silently shifted page.
func TestPageTokensAreBound(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := engine.New(encodings, models, st, engine.WithLimits(engine.Limits{MaxResponseBytes: 600}))
		off := false
		low := 0.01
		var summaries []string
		compacted := func() engine.SessionView {
			v := agentSession(t, e, compaction.Overrides{AutoCompact: &off}, 4)
			for round := 0; round < 3; round++ {
				id := fmt.Sprintf("more_%d", round)
				if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{
					userMsg("go on"), callMsg(id), resultMsg(id, strings.Repeat("lorem ipsum dolor ", 100))}}); err != nil {
					t.Fatal(err)
				}
				tier := compaction.TierPrune
				if round == 2 {
					tier = compaction.TierSummarize
				}
				res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: tier, Target: &low})
				if err != nil || res.Compaction == nil {
					t.Fatalf("round %d: %+v, %v", round, res, err)
				}
				if round == 2 {
					for _, it := range res.Compaction.Items {
						if it.Tier == string(compaction.TierSummarize) && len(it.Replaced) > 1 {
							summaries = append(summaries, it.NewID)
						}
					}
				}
			}
			return v
		}
		a, b := compacted(), compacted()
		if len(summaries) != 2 {
			t.Fatalf("summaries replacing several messages: %v", summaries)
		}
		type listing struct {
			name string
			call func(session, token string) (next string, err error)
		}
		listings := []listing{
			{"ListCompactions", func(id, tok string) (string, error) {
				p, err := e.ListCompactions(ctx, tenant, id, engine.Page{Size: 1, Token: tok})
				return p.Next, err
			}},
			{"GetMessages active", func(id, tok string) (string, error) {
				p, err := e.GetMessages(ctx, tenant, id, engine.ViewActive, engine.Page{Size: 1, Token: tok})
				return p.Next, err
			}},
			{"GetMessages log", func(id, tok string) (string, error) {
				p, err := e.GetMessages(ctx, tenant, id, engine.ViewLog, engine.Page{Size: 1, Token: tok})
				return p.Next, err
			}},
			{"ExpandMessage", func(id, tok string) (string, error) {
				msg := summaries[0]
				if id == b.ID {
					msg = summaries[1]
				}
				x, err := e.ExpandMessage(ctx, tenant, id, msg, tok)
				return x.Next, err
			}},
		}
		// Each listing's first-page token of session a and of session b.
		tokens := map[string][2]string{}
		for _, l := range listings {
			ta, err := l.call(a.ID, "")
			if err != nil || ta == "" {
				t.Fatalf("%s of %s: first page next %q, %v", l.name, a.ID, ta, err)
			}
			tb, err := l.call(b.ID, "")
			if err != nil || tb == "" {
				t.Fatalf("%s of %s: first page next %q, %v", l.name, b.ID, tb, err)
			}
			if _, err := l.call(a.ID, ta); err != nil {
				t.Errorf("%s: its own token: %v", l.name, err)
			}
			if len(ta) > 100 {
				t.Errorf("%s: a %d-byte token", l.name, len(ta))
			}
			tokens[l.name] = [2]string{ta, tb}
		}
		forge := func(parts ...string) string {
			return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(parts, ":")))
		}
		for _, l := range listings {
			raw, _ := base64.RawURLEncoding.DecodeString(tokens[l.name][1])
			f := strings.Split(string(raw), ":")
			if len(f) != 4 {
				t.Fatalf("%s token %q", l.name, raw)
			}
			bad := map[string]string{
				"another session's":    tokens[l.name][0],
				"a forged position":    forge(f[0], f[1], "99", f[3]),
				"a negative position":  forge(f[0], f[1], "-1", f[3]),
				"the old unbound form": forge(f[1], f[2]),
				"not base64":           "*",
			}
			for _, other := range listings {
				if other.name != l.name {
					bad[other.name+"'s"] = tokens[other.name][1]
				}
			}
			if l.name == "ListCompactions" {
				bad["round 0"] = forge(f[0], f[1], "0", f[3])
			}
			if l.name == "ExpandMessage" {
				bad["offset 0"] = forge(f[0], f[1], "0", f[3])
			}
			if l.name == "GetMessages active" || l.name == "GetMessages log" {
				delete(bad, "a forged position") // a position past the end is an empty page, as before
			}
			for name, token := range bad {
				_, err := l.call(b.ID, token)
				var invalid *chat.InvalidError
				if !errors.As(err, &invalid) || invalid.Violations[0].Field != "page_token" {
					t.Errorf("%s, %s token: %v; want InvalidArgument naming page_token", l.name, name, err)
				}
			}
		}
		// ExpandMessage: a token of one message does not continue another's.
		if _, err := e.ExpandMessage(ctx, tenant, b.ID, "call_0", tokens["ExpandMessage"][1]); err == nil {
			t.Error("ExpandMessage accepted another message's token")
		}
	})
}
