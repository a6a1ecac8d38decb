package postgres_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// BenchmarkCopyOnDeleteTrigger reports the time migration 00013's
// copy-on-delete trigger takes (EXPLAIN ANALYZE's "Trigger
// messages_body_copied") in deletes of 1,000 rows of a 200,000-row
// session, the tenant's forks naming 2,000 other rows of it: rows nobody
// names (unnamed), and rows each named once (named: one copy each).
func BenchmarkCopyOnDeleteTrigger(b *testing.B) {
	ctx := b.Context()
	url := pgtest.URL(b)
	s, err := postgres.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: "s", Model: "gpt-4o", Version: 1})
	}); err != nil {
		b.Fatal(err)
	}
	const rows, named = 200_000, 2_000
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO messages (tenant, session_id, id, position, role, kind, parts, tokens, created_at)
			SELECT 't', 's', 'm' || i, i, 'user', 'normal', repeat('x', 200), 1, now() FROM generate_series(1, %d) i`, rows),
		`INSERT INTO sessions (tenant, id, model, version, created_at, updated_at)
			SELECT 't', 'f' || i, 'gpt-4o', 1, now(), now() FROM generate_series(0, 19) i`,
		fmt.Sprintf(`INSERT INTO messages (tenant, session_id, id, position, role, kind, parts, tokens, created_at, body_session, body_id, body_bytes)
			SELECT 't', 'f' || (i %% 20), 'r' || i, i, 'user', 'normal', '', 1, now(), 's', 'm' || (%d + i), 200 FROM generate_series(1, %d) i`, rows-named, named),
		`ANALYZE messages`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	trigger := regexp.MustCompile(`Trigger messages_body_copied: time=([0-9.]+)`)
	deleteRange := func(from int) float64 {
		r, err := c.Query(ctx, `EXPLAIN (ANALYZE) DELETE FROM messages WHERE tenant = 't' AND session_id = 's' AND position > $1 AND position <= $2`, from, from+1000)
		if err != nil {
			b.Fatal(err)
		}
		lines, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range lines {
			if m := trigger.FindStringSubmatch(l); m != nil {
				ms, _ := strconv.ParseFloat(m[1], 64)
				return ms
			}
		}
		b.Fatalf("no trigger time in %q", lines)
		return 0
	}
	for _, k := range []struct {
		name  string
		first int
	}{{"unnamed", 0}, {"named", rows - named}} {
		b.Run(k.name, func(b *testing.B) {
			var total float64
			n := 0
			for b.Loop() {
				if n == named/1000 {
					b.StopTimer()
					break // each range is deleted once
				}
				total += deleteRange(k.first + n*1000)
				n++
			}
			b.ReportMetric(total/float64(max(n, 1)), "trigger-ms/delete")
		})
	}
}
