package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/pgtest"
)

// BenchmarkPostgresTransactionsPerCall counts the PostgreSQL transactions
// (pg_stat_database's commits and rollbacks; a statement outside a
// transaction counts as one) that one API call costs, over b.N sequential
// calls of each kind on one session: AppendMessages of one message,
// PrepareContext with one new message, GetContextUsage. The server's
// background work triggered by each call (the watch resolver reading the
// new status after each NOTIFY) is included; what the server commits with
// no calls (an idle window) is subtracted. Each window waits 11 s for every
// backend's statistics to be flushed.
//
//	go test -run '^$' -bench BenchmarkPostgresTransactionsPerCall -benchtime 100x ./internal/app/
func BenchmarkPostgresTransactionsPerCall(b *testing.B) {
	url := pgtest.URL(b)
	client := contextdv1.NewContextServiceClient(startServer(b, map[string]string{"CONTEXTD_DATABASE_URL": url}))
	ctx := b.Context()
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "rt", Model: "gpt-4.1"}); err != nil {
		b.Fatal(err)
	}
	xacts := func() int64 {
		time.Sleep(11 * time.Second)
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int64
		if err := conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n - 1 // the previous reading's own query, flushed when its connection closed
	}
	calls := []struct {
		name string
		call func(i int) error
	}{
		{"append", func(i int) error {
			_, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "rt", Messages: []*contextdv1.Message{user(fmt.Sprintf("a%d", i))}})
			return err
		}},
		{"prepare", func(i int) error {
			_, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "rt", Messages: []*contextdv1.Message{user(fmt.Sprintf("p%d", i))}})
			return err
		}},
		{"usage", func(int) error {
			_, err := client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_SessionId{SessionId: "rt"}})
			return err
		}},
	}
	// The server's own loops (job sweeps, retention) commit too: a window
	// without calls is the baseline each window's count is corrected by.
	idle := xacts()
	idle = xacts() - idle
	b.ResetTimer()
	for _, c := range calls {
		before := xacts()
		for i := range b.N {
			if err := c.call(i); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(xacts()-before-idle)/float64(b.N), c.name+"-xacts/call")
	}
	b.ReportMetric(float64(idle), "idle-xacts/window")
}
