package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// testCloseIdleSessions: the labelled sessions idle since before the
// cutoff are archived as deleted ones (gone from reads and the live count,
// purged later), in batches; recent ones and unlabelled ones stay.
func testCloseIdleSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	old, recent := epoch, epoch.Add(48*time.Hour)
	labelled := func(id string, at time.Time) {
		sess := session("t", id, at)
		sess.Labels = map[string]string{"gateway": "openai.chat"}
		create(t, s, sess)
	}
	for i := range 5 {
		labelled(fmt.Sprintf("idle%d", i), old)
	}
	labelled("recent", recent)
	create(t, s, session("t", "api", old)) // not the gateway's
	n, err := s.CloseIdleSessions(ctx, "gateway", epoch.Add(24*time.Hour), recent, 2)
	if err != nil || n != 5 {
		t.Fatalf("closed %d (%v), want the 5 idle gateway sessions", n, err)
	}
	for i := range 5 {
		if _, err := s.GetSession(ctx, "t", fmt.Sprintf("idle%d", i)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("idle%d after closing: %v", i, err)
		}
	}
	for _, id := range []string{"recent", "api"} {
		if _, err := s.GetSession(ctx, "t", id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if c, err := tx.CountSessions(ctx, "t"); err != nil || c != 2 {
			t.Errorf("%d live sessions (%v), want 2", c, err)
		}
		return nil
	})
	if n, err := s.CloseIdleSessions(ctx, "gateway", epoch.Add(24*time.Hour), recent, 2); err != nil || n != 0 {
		t.Errorf("closing again: %d (%v)", n, err)
	}
	// Archived as deleted sessions are: the purge removes them past its
	// cutoff.
	p, err := s.Purge(ctx, recent.Add(time.Hour), recent.Add(time.Hour))
	if err != nil || p.Sessions != 5 {
		t.Errorf("purge after closing: %+v (%v), want the 5 sessions", p, err)
	}
}
