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

// execBatched runs head + "(?, ...), (?, ...)" + tail for n rows of cols
// values each, batchRows rows a statement; row(i, args) appends row i's
// values.
func execBatched(ctx context.Context, tx querier, head, tail string, cols, n int, row func(i int, args []any) ([]any, error)) error {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	for start := 0; start < n; start += batchRows {
		end := min(start+batchRows, n)
		var q strings.Builder
		q.WriteString(head)
		args := make([]any, 0, (end-start)*cols)
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
