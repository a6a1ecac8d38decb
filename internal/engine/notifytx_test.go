package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store/postgres"
	"github.com/contextd/contextd/internal/watch"
)

// afterCommit is the PostgreSQL notifier, counting the announcements it
// had to send after a commit (a round trip and a pool connection each).
type afterCommit struct {
	watch.PGNotifier
	n *atomic.Int64
}

func (a afterCommit) Notify(ctx context.Context, c watch.Change) {
	a.n.Add(1)
	a.PGNotifier.Notify(ctx, c)
}

// TestWritesAnnounceInTheirTransaction: on PostgreSQL the hot writes —
// PrepareContext's append, AppendMessages, ReportUsage, RecordExchange —
// send their NOTIFY inside their transaction (delivered at commit), not on
// a connection of their own after it; a listener gets each one, at the
// version the write committed. Before, each was sent after the commit.
func TestWritesAnnounceInTheirTransaction(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	listener, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close(context.Background()) })
	if _, err := listener.Exec(ctx, "LISTEN "+watch.Channel); err != nil {
		t.Fatal(err)
	}
	next := func() watch.Change {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := listener.WaitForNotification(wctx)
		if err != nil {
			t.Fatal(err)
		}
		var c watch.Change
		if err := json.Unmarshal([]byte(n.Payload), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	var after atomic.Int64
	models, encodings := testModels(t)
	e := engine.New(encodings, models, st, engine.WithNotifier(afterCommit{watch.PGNotifier{Pool: st.Pool()}, &after}))
	v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o", System: "sys"})
	if err != nil {
		t.Fatal(err)
	}
	next() // the creation's, after its commit
	after.Store(0)
	prep, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Version != prep.Status.Version || c.Event != watch.EventAppended {
		t.Fatalf("PrepareContext announced %+v, want appended at %d", c, prep.Status.Version)
	}
	app, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{replyMsg("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Version != app.Version || c.Event != watch.EventAppended {
		t.Fatalf("AppendMessages announced %+v, want appended at %d", c, app.Version)
	}
	if _, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: prep.Status.Usage.Used, ViewToken: prep.ViewToken}); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Version != app.Version+1 || c.Event != watch.EventUpdated {
		t.Fatalf("ReportUsage announced %+v, want updated at %d", c, app.Version+1)
	}
	s, err := e.GetSession(ctx, tenant, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.RecordExchange(ctx, tenant, v.ID, engine.ExchangeInput{Reply: []chat.Message{userMsg("more"), replyMsg("yes")},
		LogCount: s.LogCount, Created: s.CreatedAt, Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Version != out.Version || c.Event != watch.EventAppended {
		t.Fatalf("RecordExchange announced %+v, want appended at %d", c, out.Version)
	}
	if n := after.Load(); n != 0 {
		t.Fatalf("%d announcements sent after their commit, want 0", n)
	}
}
