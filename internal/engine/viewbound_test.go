package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestViewIsBoundedAtAppend: an append that would grow the active view past
// MaxViewBytes, or past MaxViewWindows times the model's window in tokens,
// is refused and changes nothing: FailedPrecondition when the view is what
// is large (compacting or clearing makes the same append succeed),
// InvalidArgument on messages when the append alone is over (issue 24: 30
// appends of 7 MB made a 210 MB view that every PrepareContext then
// failed on).
func TestViewIsBoundedAtAppend(t *testing.T) {
	opts := []engine.Option{engine.WithLimits(engine.Limits{MaxViewBytes: 200_000, MaxViewWindows: 1})}
	backendsWith(t, opts, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		s := newSession(t, e)
		big := userMsg(strings.Repeat("0123456789", 6_000)) // 60 KB, few tokens a byte
		for range 3 {
			if _, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{big}}); err != nil {
				t.Fatal(err)
			}
		}
		before, err := e.GetSession(ctx, tenant, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{big}})
		if !errors.Is(err, engine.ErrFailedPrecondition) || !strings.Contains(err.Error(), "CONTEXTD_MAX_VIEW_BYTES") {
			t.Fatalf("a fourth 60 KB append over a 200 KB bound: %v; want FailedPrecondition naming CONTEXTD_MAX_VIEW_BYTES", err)
		}
		var inv *chat.InvalidError
		alone := userMsg(strings.Repeat("0123456789", 25_000))
		if _, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{alone}}); !errors.As(err, &inv) ||
			inv.Violations[0].Field != "messages" {
			t.Errorf("a 250 KB append, over the bound alone: %v; want InvalidArgument on messages", err)
		}
		after, err := e.GetSession(ctx, tenant, s.ID)
		if err != nil || after.Version != before.Version || after.Usage.MessageCount != 3 {
			t.Errorf("refused appends changed the session: version %d → %d, %d messages (%v)", before.Version, after.Version, after.Usage.MessageCount, err)
		}
		if _, err := e.ClearMessages(ctx, tenant, s.ID, false, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{big}}); err != nil {
			t.Errorf("after a clear the same append: %v", err)
		}

	})
}

// TestViewIsBoundedInWindows: the token bound, MaxViewWindows times the
// model's window (gpt-4o: 128,000), likewise.
func TestViewIsBoundedInWindows(t *testing.T) {
	opts := []engine.Option{engine.WithLimits(engine.Limits{MaxViewWindows: 1})}
	backendsWith(t, opts, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		s := newSession(t, e)
		words := func(n int) chat.Message { return userMsg(strings.Repeat(" word", n)) }
		if _, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{words(100_000)}}); err != nil {
			t.Fatal(err)
		}
		_, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{words(50_000)}})
		if !errors.Is(err, engine.ErrFailedPrecondition) || !strings.Contains(err.Error(), "CONTEXTD_MAX_VIEW_WINDOWS") {
			t.Errorf("150,000 tokens over a one-window bound: %v; want FailedPrecondition naming CONTEXTD_MAX_VIEW_WINDOWS", err)
		}
		var inv *chat.InvalidError
		if _, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{words(130_000)}}); !errors.As(err, &inv) {
			t.Errorf("130,000 tokens in one append: %v; want InvalidArgument", err)
		}
	})
}

// sizedReads counts the messages a store hands the engine.
type sizedReads struct {
	store.Store
	loaded *atomic.Int64
}

func (s sizedReads) ActiveMessages(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, []int64, error) {
	msgs, ords, err := s.Store.ActiveMessages(ctx, tenant, id, after, limit)
	s.loaded.Add(int64(len(msgs)))
	return msgs, ords, err
}

func (s sizedReads) LogMessages(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, error) {
	msgs, err := s.Store.LogMessages(ctx, tenant, id, after, limit)
	s.loaded.Add(int64(len(msgs)))
	return msgs, err
}

func (s sizedReads) MessagesByID(ctx context.Context, tenant, id string, ids []string) ([]chat.Message, error) {
	msgs, err := s.Store.MessagesByID(ctx, tenant, id, ids)
	s.loaded.Add(int64(len(msgs)))
	return msgs, err
}

// TestMessagePagesReadByBytes: a page of GetMessages ends at
// MaxResponseBytes in the store query, by the rows' stored sizes, so a page
// of large messages loads about what it answers (before: page_size full
// rows, trimmed after loading).
func TestMessagePagesReadByBytes(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		var loaded atomic.Int64
		e := engine.New(encodings, models, sizedReads{st, &loaded},
			engine.WithLimits(engine.Limits{MaxResponseBytes: 250_000}), engine.WithViewCacheBytes(0))
		s := newSession(t, e)
		for range 10 {
			if _, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{userMsg(strings.Repeat("0123456789", 10_000))}}); err != nil {
				t.Fatal(err)
			}
		}
		for _, view := range []engine.View{engine.ViewActive, engine.ViewLog} {
			loaded.Store(0)
			page, err := e.GetMessages(ctx, tenant, s.ID, view, engine.Page{Size: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Messages) != 2 || page.Next == "" {
				t.Fatalf("view %v: a page of %d messages (next %q); want 2 of 100 KB under 250 KB, and a next page", view, len(page.Messages), page.Next)
			}
			if n := loaded.Load(); n > 3 {
				t.Errorf("view %v: the store loaded %d messages to answer 2", view, n)
			}
			rest, err := e.GetMessages(ctx, tenant, s.ID, view, engine.Page{Size: 100, Token: page.Next})
			if err != nil || len(rest.Messages) != 2 || rest.Messages[0].Position != 3 {
				t.Errorf("view %v: next page %d messages from position %d (%v)", view, len(rest.Messages), rest.Messages[0].Position, err)
			}
		}
	})
}

// TestLogTailReadsByBytes: LogTailOf (the gateway's log matching) loads only
// the rows that fit CONTEXTD_MAX_RESPONSE_BYTES, in order, however many it
// is asked for: a cold review made one request load 720 MB of log.
func TestLogTailReadsByBytes(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		var loaded atomic.Int64
		e := engine.New(encodings, models, sizedReads{st, &loaded},
			engine.WithLimits(engine.Limits{MaxResponseBytes: 250_000}), engine.WithViewCacheBytes(0))
		s := newSession(t, e)
		for range 10 {
			if _, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{userMsg(strings.Repeat("0123456789", 10_000))}}); err != nil {
				t.Fatal(err)
			}
		}
		var after int64
		for reads := 0; after < 10; reads++ {
			loaded.Store(0)
			msgs, err := e.LogTailOf(ctx, store.Session{Tenant: tenant, ID: s.ID}, after, 0)
			if err != nil || len(msgs) != 2 || msgs[0].Position != after+1 || msgs[1].Position != after+2 {
				t.Fatalf("LogTailOf after %d: %d messages (%v)", after, len(msgs), err)
			}
			if n := loaded.Load(); n > 3 {
				t.Errorf("LogTailOf loaded %d messages to answer 2", n)
			}
			after = msgs[1].Position
		}
	})
}

// TestViewOverWindowsAfterModelChange: a session moved to a model with a
// smaller window, whose view is now past MaxViewWindows of it, still takes
// PrepareContext's append and is compacted by it (a cold review found
// every PrepareContext refused, for good, after such a change).
func TestViewOverWindowsAfterModelChange(t *testing.T) {
	opts := []engine.Option{engine.WithLimits(engine.Limits{MaxViewWindows: 1})}
	backendsWith(t, opts, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		s := newSession(t, e) // gpt-4o: 128,000 tokens
		for i := range 12 {
			msgs := []chat.Message{userMsg(fmt.Sprintf("step %d:%s", i, strings.Repeat(" word", 2_000)))}
			if _, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: msgs}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "ok"}}}}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.UpdateSession(ctx, tenant, s.ID, engine.SessionUpdate{Mask: []string{engine.FieldModel}, Model: "gpt-4"}); err != nil {
			t.Fatal(err) // 8,192 tokens: the view is about three windows now
		}
		// A plain append, which compacts nothing, is still refused.
		if _, err := e.AppendMessages(ctx, tenant, s.ID, engine.AppendInput{Messages: []chat.Message{userMsg("more")}}); !errors.Is(err, engine.ErrFailedPrecondition) {
			t.Errorf("AppendMessages on a view past the bound: %v; want FailedPrecondition", err)
		}
		res, err := e.PrepareContext(ctx, tenant, s.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("go on")}})
		if err != nil {
			t.Fatalf("PrepareContext after the change: %v", err)
		}
		if !res.Status.Compacted || res.Status.Usage.PercentUsed > 100 {
			t.Errorf("not compacted to fit: compacted %v, %.0f %% used", res.Status.Compacted, res.Status.Usage.PercentUsed)
		}
	})
}
