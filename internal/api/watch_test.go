package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/tokens"
	"github.com/contextd/contextd/internal/watch"
)

// listRecorder is a real store that records the limit of each listing
// (ListSessions without an ID).
type listRecorder struct {
	store.Store
	mu     sync.Mutex
	limits []int
}

func (r *listRecorder) ListSessions(ctx context.Context, tenant string, f store.ListFilter) ([]store.SessionSummary, error) {
	if f.ID == "" { // a listing, not one session's summary row
		r.mu.Lock()
		r.limits = append(r.limits, f.Limit)
		r.mu.Unlock()
	}
	return r.Store.ListSessions(ctx, tenant, f)
}

// TestTenantWatchSnapshotIsPaged: a tenant-wide WatchContextStatus of a
// tenant with more sessions than two snapshot pages sends a snapshot of
// every session, once, over a real gRPC connection, while the store is only
// ever asked for a page of sessions at a time.
func TestTenantWatchSnapshotIsPaged(t *testing.T) {
	ctx := t.Context()
	db, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rec := &listRecorder{Store: db}
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(tokens.NewEncodings(), models, rec)
	n := 2*snapshotPage + 3
	for i := range n {
		if _, err := eng.CreateSession(ctx, auth.DefaultTenant, engine.NewSession{ID: fmt.Sprintf("s%04d", i), Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.CreateSession(ctx, "other", engine.NewSession{ID: "elsewhere", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}

	conn := serve(t, eng)

	rec.mu.Lock()
	rec.limits = nil
	rec.mu.Unlock()
	stream, err := contextdv1.NewContextServiceClient(conn).WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for len(seen) < n {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d snapshots: %v", len(seen), err)
		}
		st := resp.GetStatus()
		if st.GetEvent() != contextdv1.StatusEvent_STATUS_EVENT_SNAPSHOT || st.GetVersion() != 1 || st.GetUsage().GetModel() != "gpt-4o" {
			t.Fatalf("not a snapshot of a new session: %v", st)
		}
		seen[st.GetSessionId()]++
	}
	for i := range n {
		if id := fmt.Sprintf("s%04d", i); seen[id] != 1 {
			t.Errorf("%s: %d snapshots", id, seen[id])
		}
	}
	if seen["elsewhere"] != 0 {
		t.Error("another tenant's session was sent")
	}
	rec.mu.Lock()
	limits := append([]int(nil), rec.limits...)
	rec.mu.Unlock()
	if len(limits) != 3 {
		t.Errorf("the store was asked %d times (%v); want 3 pages for %d sessions", len(limits), limits, n)
	}
	for _, l := range limits {
		if l <= 0 || l > snapshotPage+1 {
			t.Errorf("a ListSessions with limit %d; want at most a page (%d) plus one", l, snapshotPage)
		}
	}
}

// serve serves the ContextService of eng over a real gRPC listener, without
// interceptors, and returns a client connection to it.
func serve(t *testing.T, eng *engine.Engine) *grpc.ClientConn {
	t.Helper()
	hub := watch.NewHub(8)
	t.Cleanup(hub.Close)
	srv := grpc.NewServer()
	contextdv1.RegisterContextServiceServer(srv, NewContextService(eng, hub, slog.New(slog.NewTextHandler(io.Discard, nil))))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
