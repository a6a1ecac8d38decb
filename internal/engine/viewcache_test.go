package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
	"github.com/contextd/contextd/internal/store/sqlite"
)

// replicas runs fn per backend with two engines ("replicas", each with its
// own view cache and connection pool) over one database, and that
// database's store.
func replicas(t *testing.T, fn func(t *testing.T, a, b *engine.Engine, st store.Store)) {
	models, encodings := testModels(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			dir, url := t.TempDir(), ""
			if backend == "postgres" {
				url = pgtest.URL(t)
			}
			open := func() store.Store {
				var s store.Store
				var err error
				if backend == "postgres" {
					s, err = postgres.Open(t.Context(), url)
				} else {
					s, err = sqlite.Open(t.Context(), dir)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			sa, sb := open(), open()
			fn(t, engine.New(encodings, models, sa), engine.New(encodings, models, sb), sa)
		})
	}
}

// sameMessages compares views by what a client sees of each message.
func sameMessages(t *testing.T, what string, got, want []chat.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d (%s vs %s)", what, len(got), len(want), idList(got), idList(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Tokens != w.Tokens || g.Kind != w.Kind || g.Role != w.Role || !reflect.DeepEqual(g.Parts, w.Parts) ||
			!g.CreatedAt.Equal(w.CreatedAt) || !reflect.DeepEqual(g.Replaces, w.Replaces) {
			t.Fatalf("%s: message %d is %+v, want %+v", what, i, g, w)
		}
	}
}

func idList(msgs []chat.Message) string {
	ids := make([]string, len(msgs))
	for i := range msgs {
		ids[i] = msgs[i].ID
	}
	return strings.Join(ids, " ")
}

// TestViewCacheAcrossReplicas drives one session through two replicas at
// random (appends on either, compactions and reverts on the other) while a
// client on replica A keeps its copy of the view with view tokens: after
// every step, its copy, a full PrepareContext and GetMessages on A all
// equal the view as stored, whatever B changed behind A's cache.
func TestViewCacheAcrossReplicas(t *testing.T) {
	replicas(t, func(t *testing.T, a, b *engine.Engine, st store.Store) {
		ctx := t.Context()
		off := false
		v, err := a.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o", System: "You are a coding agent.",
			Policy: compaction.Overrides{AutoCompact: &off}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("Fix the bug.")}}); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		var held []chat.Message
		token := ""
		deltas, fulls := 0, 0
		for step := range 60 {
			replica := a
			if rng.IntN(2) == 0 {
				replica = b
			}
			switch op := rng.IntN(10); {
			case op < 6:
				id := fmt.Sprintf("c%d", step)
				out := fmt.Sprintf("step %d: %s", step, strings.Repeat("lorem ipsum dolor ", 20+rng.IntN(200)))
				if _, err := replica.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{
					Messages: []chat.Message{callMsg(id), resultMsg(id, out)}}); err != nil {
					t.Fatal(err)
				}
			case op < 8:
				if _, err := b.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: ptr(0.01)}); err != nil {
					t.Fatal(err)
				}
			default:
				list, err := compactionsOf(b, ctx, tenant, v.ID)
				if err != nil {
					t.Fatal(err)
				}
				for i := len(list) - 1; i >= 0; i-- {
					if list[i].RevertedAt == nil {
						if _, err := b.RevertCompaction(ctx, tenant, v.ID, list[i].ID); err != nil {
							t.Fatal(err)
						}
						break
					}
				}
			}
			stored, _, err := st.ActiveMessages(ctx, tenant, v.ID, 0, 1_000_000)
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{ViewToken: token})
			if err != nil {
				t.Fatal(err)
			}
			if res.Delta {
				held = append(held, res.Messages...)
				deltas++
			} else {
				held = append([]chat.Message(nil), res.Messages...)
				fulls++
			}
			token = res.ViewToken
			sameMessages(t, fmt.Sprintf("step %d: the client's copy", step), held, stored)
			full, err := a.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
			if err != nil {
				t.Fatal(err)
			}
			sameMessages(t, fmt.Sprintf("step %d: PrepareContext", step), full.Messages, stored)
			if full.Delta || full.Status.Version != res.Status.Version {
				t.Fatalf("step %d: a call without a token answered delta=%v at version %d (the other %d)", step, full.Delta,
					full.Status.Version, res.Status.Version)
			}
			var paged []chat.Message
			for tok := ""; ; {
				page, err := a.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 7, Token: tok})
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, page.Messages...)
				if tok = page.Next; tok == "" {
					break
				}
			}
			sameMessages(t, fmt.Sprintf("step %d: GetMessages", step), paged, stored)
		}
		if deltas < 10 || fulls < 5 {
			t.Errorf("%d delta and %d full answers; the walk should exercise both", deltas, fulls)
		}
	})
}

// TestViewTokens: a delta carries exactly the appended messages, a rewrite
// of the view answers in full, and a token this server did not issue for
// the session is InvalidArgument naming view_token, with nothing changed.
func TestViewTokens(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{}, 3)
		first, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
		if err != nil || first.Delta || len(first.Messages) != 7 || first.ViewToken == "" {
			t.Fatalf("first: delta %v, %d messages, token %q, %v", first.Delta, len(first.Messages), first.ViewToken, err)
		}
		same, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{ViewToken: first.ViewToken})
		if err != nil || !same.Delta || len(same.Messages) != 0 || same.ViewToken != first.ViewToken {
			t.Fatalf("unchanged: delta %v, %d messages, %v", same.Delta, len(same.Messages), err)
		}
		grown, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{ViewToken: first.ViewToken,
			Messages: []chat.Message{callMsg("late"), resultMsg("late", "done")}})
		if err != nil || !grown.Delta || idList(grown.Messages) != "msg_8 msg_9" {
			t.Fatalf("grown: delta %v, messages %s, %v", grown.Delta, idList(grown.Messages), err)
		}
		// An older token still works: the view only grew since.
		again, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{ViewToken: first.ViewToken})
		if err != nil || !again.Delta || idList(again.Messages) != "msg_8 msg_9" {
			t.Fatalf("old token: delta %v, messages %s, %v", again.Delta, idList(again.Messages), err)
		}
		if _, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune, Target: ptr(0.01)}); err != nil {
			t.Fatal(err)
		}
		rewritten, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{ViewToken: grown.ViewToken})
		if err != nil || rewritten.Delta || rewritten.ViewToken == grown.ViewToken {
			t.Fatalf("after a compaction: delta %v, %v", rewritten.Delta, err)
		}
		other := agentSession(t, e, compaction.Overrides{}, 1)
		before, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		otherView, err := e.PrepareContext(ctx, tenant, other.ID, engine.PrepareInput{})
		if err != nil {
			t.Fatal(err)
		}
		for name, tok := range map[string]string{"garbage": "%%%", "base64 of nonsense": "bm9uc2Vuc2U",
			"another session's": otherView.ViewToken, "truncated": first.ViewToken[:len(first.ViewToken)-3]} {
			_, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{ViewToken: tok,
				Messages: []chat.Message{userMsg("must not be appended")}})
			var inv *chat.InvalidError
			if !errors.As(err, &inv) || inv.Violations[0].Field != "view_token" {
				t.Errorf("%s token: %v, want InvalidArgument on view_token", name, err)
			}
		}
		after, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil || after.Version != before.Version || after.LogCount != before.LogCount {
			t.Errorf("a rejected call changed the session: version %d → %d, log %d → %d", before.Version, after.Version,
				before.LogCount, after.LogCount)
		}
	})
}

// TestViewCacheTenants: the same session id in two tenants never shares a
// cached view.
func TestViewCacheTenants(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		for _, tn := range []string{"acme", "globex"} {
			if _, err := e.CreateSession(ctx, tn, engine.NewSession{ID: "shared", Model: "gpt-4o"}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.AppendMessages(ctx, tn, "shared", engine.AppendInput{Messages: []chat.Message{userMsg("I am " + tn)}}); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 { // the second round reads from the cache
			for _, tn := range []string{"acme", "globex"} {
				res, err := e.PrepareContext(ctx, tn, "shared", engine.PrepareInput{})
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Messages[0].Parts[0].Text; got != "I am "+tn {
					t.Errorf("tenant %s reads %q", tn, got)
				}
			}
		}
	})
}
