package sqlite

import (
	"context"
	"strings"
)

// batchRows is how many rows one multi-row statement carries: an append of
// thousands of rows (messages, view entries, tool calls) is a few
// statements, not one round through the driver per row, so it holds the
// database's one writer for milliseconds (10 messages × 4,000 tool calls
// once held it 5 s). SQLite allows 32,766 parameters a statement; the
// widest row here has 14.
const batchRows = 500

// batchValues bounds the values of one multi-row insert: the pure-Go
// driver binds a statement's values in time quadratic in their count
// (modernc.org/sqlite's bind looks each up among all of them), so 500 rows
// of 14 values spent about 50 µs of CPU a row in the lookup alone — 11 %
// of the gateway's CPU in a profile where conversations were created with
// 100 and 1,000 messages (docs/performance.md). With at most 256 values a
// statement (18 messages, 51 view entries) the lookup is 2 µs a row, and
// the statement's text is short enough to be prepared once (prepared.go)
// instead of parsed each time.
const batchValues = 256

// execBatched runs head + "(?, ...), (?, ...)" + tail for n rows of cols
// values each, batchValues values a statement (at most batchRows rows);
// row(i, args) appends row i's values.
func execBatched(ctx context.Context, tx querier, head, tail string, cols, n int, row func(i int, args []any) ([]any, error)) error {
	return execBatchedAfter(ctx, tx, head, tail, nil, cols, n, row)
}

// execBatchedAfter is execBatched for a statement whose head binds lead
// (its ?1, ?2, ... before the rows' plain ?s) in every statement.
func execBatchedAfter(ctx context.Context, tx querier, head, tail string, lead []any, cols, n int, row func(i int, args []any) ([]any, error)) error {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	rows := max(1, min(batchRows, (batchValues-len(lead))/cols))
	for start := 0; start < n; start += rows {
		end := min(start+rows, n)
		var q strings.Builder
		q.WriteString(head)
		args := make([]any, 0, len(lead)+(end-start)*cols)
		args = append(args, lead...)
		for i := start; i < end; i++ {
			if i > start {
				q.WriteString(", ")
			}
			q.WriteString(one)
			var err error
			if args, err = row(i, args); err != nil {
				return err
			}
		}
		q.WriteString(tail)
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// inBatches calls fn with ids batchRows at a time and the "?, ?, ..." list
// of placeholders for them.
func inBatches(ids []string, fn func(batch []any, placeholders string) error) error {
	for start := 0; start < len(ids); start += batchRows {
		end := min(start+batchRows, len(ids))
		batch := make([]any, end-start)
		for i, id := range ids[start:end] {
			batch[i] = id
		}
		if err := fn(batch, strings.TrimSuffix(strings.Repeat("?, ", len(batch)), ", ")); err != nil {
			return err
		}
	}
	return nil
}
