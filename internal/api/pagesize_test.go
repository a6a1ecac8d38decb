package api

import (
	"context"
	"math"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/tokens"
)

// pageRecorder is a real store that records the limit of every paged read a
// listing RPC makes (ListSessions, GetMessages, ListCompactions).
type pageRecorder struct{ listRecorder }

func (r *pageRecorder) record(limit int) {
	r.mu.Lock()
	r.limits = append(r.limits, limit)
	r.mu.Unlock()
}

func (r *pageRecorder) ActiveMessages(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, []int64, error) {
	r.record(limit)
	return r.Store.ActiveMessages(ctx, tenant, id, after, limit)
}

func (r *pageRecorder) LogMessages(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Message, error) {
	r.record(limit)
	return r.Store.LogMessages(ctx, tenant, id, after, limit)
}

func (r *pageRecorder) ActiveSizes(ctx context.Context, tenant, id string, after int64, limit int) ([]store.RowSize, error) {
	r.record(limit)
	return r.Store.ActiveSizes(ctx, tenant, id, after, limit)
}

func (r *pageRecorder) LogSizes(ctx context.Context, tenant, id string, after int64, limit int) ([]store.RowSize, error) {
	r.record(limit)
	return r.Store.LogSizes(ctx, tenant, id, after, limit)
}

func (r *pageRecorder) ListCompactions(ctx context.Context, tenant, id string, after, limit int) ([]store.Compaction, error) {
	r.record(limit)
	return r.Store.ListCompactions(ctx, tenant, id, after, limit)
}

// TestPageSizesAreClamped: behind a real gRPC listener without the request
// validator (a caller of the service that skips it), a page_size of
// 2147483647 on ListSessions, GetMessages (log and active view) and
// ListCompactions answers a normal page, and the store is never asked for
// more than engine.MaxPageSize+1 rows by any of them.
func TestPageSizesAreClamped(t *testing.T) {
	ctx := t.Context()
	db, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rec := &pageRecorder{listRecorder{Store: db}}
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(tokens.NewEncodings(), models, rec)
	if _, err := eng.CreateSession(ctx, auth.DefaultTenant, engine.NewSession{ID: "s", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	hello := chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "hello"}}}
	if _, err := eng.AppendMessages(ctx, auth.DefaultTenant, "s", engine.AppendInput{Messages: []chat.Message{hello, hello}}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.ClearMessages(ctx, auth.DefaultTenant, "s", false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.AppendMessages(ctx, auth.DefaultTenant, "s", engine.AppendInput{Messages: []chat.Message{hello}}); err != nil {
		t.Fatal(err)
	}

	conn := serve(t, engine.New(tokens.NewEncodings(), models, rec))
	client := contextdv1.NewContextServiceClient(conn)

	rec.mu.Lock()
	rec.limits = nil
	rec.mu.Unlock()
	const huge = math.MaxInt32
	sessions, err := client.ListSessions(ctx, &contextdv1.ListSessionsRequest{PageSize: huge})
	if err != nil || len(sessions.GetSessions()) != 1 {
		t.Errorf("ListSessions: %v, %v", sessions, err)
	}
	for view, want := range map[contextdv1.MessageView]int{contextdv1.MessageView_MESSAGE_VIEW_LOG: 3, contextdv1.MessageView_MESSAGE_VIEW_ACTIVE: 1} {
		msgs, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "s", View: view, PageSize: huge})
		if err != nil || len(msgs.GetMessages()) != want {
			t.Errorf("GetMessages %v: %v, %v; want %d messages", view, msgs, err, want)
		}
	}
	list, err := client.ListCompactions(ctx, &contextdv1.ListCompactionsRequest{SessionId: "s", PageSize: huge})
	if err != nil || len(list.GetCompactions()) != 1 {
		t.Errorf("ListCompactions: %v, %v", list, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.limits) < 4 {
		t.Errorf("%d paged store reads for four listings: %v", len(rec.limits), rec.limits)
	}
	for _, l := range rec.limits {
		if l > engine.MaxPageSize+1 {
			t.Errorf("a store read of up to %d rows for page_size %d; want at most %d", l, huge, engine.MaxPageSize+1)
		}
	}
}
