package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/watch"
)

// changes records what an engine announces.
type changes struct {
	mu   sync.Mutex
	list []watch.Change
}

func (c *changes) Notify(_ context.Context, ch watch.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, ch)
}

func (c *changes) last() watch.Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.list) == 0 {
		return watch.Change{}
	}
	return c.list[len(c.list)-1]
}

// TestReportBumpsVersion: anchoring changes the usage a watcher shows, so a
// report bumps the version and announces it; the view (and its cache) is
// unchanged.
func TestReportBumpsVersion(t *testing.T) {
	seen := &changes{}
	backendsWith(t, []engine.Option{engine.WithNotifier(seen)}, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "You are a coding agent."})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg(strings.Repeat("fix the build ", 50))}}); err != nil {
			t.Fatal(err)
		}
		before, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		ver := before.Version
		u, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: before.Usage.Used + 25, Version: &ver})
		if err != nil {
			t.Fatal(err)
		}
		after, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if after.Version != before.Version+1 {
			t.Errorf("version %d → %d after a report", before.Version, after.Version)
		}
		if got := seen.last(); got.SessionID != v.ID || got.Version != after.Version || got.Event != watch.EventUpdated {
			t.Errorf("announced %+v, want %s at version %d", got, watch.EventUpdated, after.Version)
		}
		if after.Usage.Source != engine.SourceAnchored || after.Usage.Used != u.Used {
			t.Errorf("usage after the report: %v %d, reported %d", after.Usage.Source, after.Usage.Used, u.Used)
		}
		msgs, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{})
		if err != nil || len(msgs.Messages) != 1 {
			t.Fatalf("view after the report: %d messages, %v", len(msgs.Messages), err)
		}
	})
}

// TestConcurrentReportsCalibrate: reports of different sessions of one
// model, sent at once, each add their sample to the model's calibration
// (on PostgreSQL they used to overwrite each other's).
func TestConcurrentReportsCalibrate(t *testing.T) {
	backendStores(t, func(t *testing.T, st store.Store) {
		models, encodings := testModels(t)
		e := engine.New(encodings, models, st)
		ctx := t.Context()
		const sessions, reports = 4, 5
		ids := make([]string, sessions)
		for i := range ids {
			v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "claude-sonnet-4-5", System: "You are a coding agent."})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg(strings.Repeat("fix the build ", 50))}}); err != nil {
				t.Fatal(err)
			}
			ids[i] = v.ID
		}
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				for range reports {
					s, err := e.GetSession(ctx, tenant, id)
					if err != nil {
						t.Error(err)
						return
					}
					if _, err := e.ReportUsage(ctx, tenant, id, engine.ReportInput{InputTokens: s.SystemTokens + s.ActiveTokens + 40}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		c, err := st.GetCalibration(ctx, tenant, "claude-sonnet-4-5")
		if err != nil {
			t.Fatal(err)
		}
		if c.Samples != sessions*reports {
			t.Errorf("calibration holds %d samples of the %d reports", c.Samples, sessions*reports)
		}
	})
}

// TestDeletedIDReused: the id of a deleted session can be created again, as
// a fresh session (the deleted one's archive goes with it).
func TestDeletedIDReused(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		if _, err := e.CreateSession(ctx, tenant, engine.NewSession{ID: "again", Model: "gpt-4o", System: "first"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.AppendMessages(ctx, tenant, "again", engine.AppendInput{Messages: []chat.Message{userMsg("old")}}); err != nil {
			t.Fatal(err)
		}
		if err := e.DeleteSession(ctx, tenant, "again"); err != nil {
			t.Fatal(err)
		}
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{ID: "again", Model: "gpt-4o", System: "second"})
		if err != nil {
			t.Fatalf("re-creating a deleted id: %v", err)
		}
		got, err := e.GetSession(ctx, tenant, "again")
		if err != nil || got.SystemPrompt != "second" || got.ActiveCount != 0 || got.LogCount != 0 || got.Version != v.Version {
			t.Fatalf("the new session: %+v, %v", got.Session, err)
		}
		if _, err := e.CreateSession(ctx, tenant, engine.NewSession{ID: "again", Model: "gpt-4o"}); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("a live id taken again: %v", err)
		}
	})
}
