package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestPrepareNoHeads: PrepareContext given chains another session holds as
// its head (PrepareInput.NoHeads) fails with store.ErrLongerSession and
// changes nothing, and goes on when none is a head. Both stores: PostgreSQL
// checks them with the lock, SQLite reads the index before the
// transaction (it would append without either).
func TestPrepareNoHeads(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := newSession(t, e)
		c1, c2, cx := strings.Repeat("1", 32), strings.Repeat("2", 32), strings.Repeat("f", 32) // chains are 32 hex digits
		longer := newSession(t, e)
		indexed := func(text, at string) chat.Message {
			m := userMsg(text)
			m.Metadata = map[string]string{store.HistoryMetadata: at}
			return m
		}
		if _, err := e.PrepareContext(ctx, tenant, longer.ID, engine.PrepareInput{Messages: []chat.Message{indexed("one", "1:"+c1), indexed("two", "2:"+c2)}}); err != nil {
			t.Fatal(err)
		}
		before, err := e.SessionRow(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("x")}, NoHeads: []string{cx, c2}, Read: &before})
		if !errors.Is(err, store.ErrLongerSession) {
			t.Errorf("with a head among the chains: %v, want ErrLongerSession", err)
		}
		if after, err := e.SessionRow(ctx, tenant, v.ID); err != nil || after.Version != before.Version || after.LogCount != before.LogCount {
			t.Errorf("the failed call changed the session: version %d → %d, log %d → %d (%v)", before.Version, after.Version, before.LogCount, after.LogCount, err)
		}
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("x")}, NoHeads: []string{cx, c1}})
		if err != nil || len(res.Messages) != 1 {
			t.Errorf("with no head among the chains: %d messages, %v; want the append", len(res.Messages), err)
		}
	})
}
