package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// Purge fixture shape: per compaction, purgeItems summaries each replacing
// purgeOriginals originals and the same slot's summary of the compaction
// before (nesting), purgeDoomed unreferenced messages, and a view_before of
// purgeViewBefore ids.
const (
	purgeItems      = 20
	purgeOriginals  = 4
	purgeDoomed     = 10
	purgeViewBefore = 500
	purgePad        = purgeViewBefore - purgeItems*(purgeOriginals+1)
)

// PurgeFixture writes one session (tenant/sessionID) with c compactions,
// all revertible at now, of messages created at created: the shape of a
// long-running agent session compacted c times in its revert window. The
// active view holds the last compaction's summaries; every compaction's
// view_before names 500 ids. A purge keeps everything but the c*10 doomed
// messages, which it deletes.
func PurgeFixture(tb testing.TB, s store.Store, tenant, sessionID string, c int, created, now time.Time) (doomed int) {
	tb.Helper()
	ctx := context.Background()
	pos := int64(0)
	msg := func(id string) chat.Message {
		pos++
		return chat.Message{ID: id, Position: pos, Role: chat.RoleUser, Kind: chat.KindNormal, Tokens: 1, CreatedAt: created,
			Parts: []chat.Part{{Type: chat.PartText, Text: id}}}
	}
	err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		sess := session(tenant, sessionID, created)
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		var msgs []chat.Message
		var pad []string
		for k := range purgePad {
			pad = append(pad, fmt.Sprintf("pad%d", k))
			msgs = append(msgs, msg(pad[k]))
		}
		var comps []*store.Compaction
		for i := range c {
			comp := &store.Compaction{ID: fmt.Sprintf("c%d", i), Round: i + 1, CreatedAt: created, ExpiresAt: now.Add(time.Hour)}
			for j := range purgeItems {
				it := store.CompactionItem{Tier: "summarize", NewID: fmt.Sprintf("s%d_%d", i, j)}
				for k := range purgeOriginals {
					it.Replaced = append(it.Replaced, fmt.Sprintf("o%d_%d_%d", i, j, k))
				}
				if i > 0 {
					it.Replaced = append(it.Replaced, fmt.Sprintf("s%d_%d", i-1, j))
				}
				for _, id := range it.Replaced[:purgeOriginals] {
					msgs = append(msgs, msg(id))
				}
				msgs = append(msgs, msg(it.NewID))
				comp.ViewBefore = append(comp.ViewBefore, it.Replaced...)
				comp.Items = append(comp.Items, it)
			}
			comp.ViewBefore = append(comp.ViewBefore, pad[:purgeViewBefore-len(comp.ViewBefore)]...)
			for k := range purgeDoomed {
				msgs = append(msgs, msg(fmt.Sprintf("d%d_%d", i, k)))
			}
			comps = append(comps, comp)
		}
		if err := tx.InsertMessages(ctx, tenant, sessionID, msgs); err != nil {
			return err
		}
		var view []store.ViewEntry
		for j := range purgeItems {
			view = append(view, store.ViewEntry{Ord: int64(j + 1), MessageID: fmt.Sprintf("s%d_%d", c-1, j)})
		}
		if err := tx.AppendView(ctx, tenant, sessionID, view); err != nil {
			return err
		}
		for _, comp := range comps {
			if err := tx.InsertCompaction(ctx, tenant, sessionID, comp); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return c * purgeDoomed
}

// testPurgeLinear: a purge's work (store.Purged.Examined, a deterministic
// count of the rows and edges it read and visited) grows linearly with the
// compactions in a session: 4x the compactions cost about 4x, where a
// per-(compaction, item) scan of every compaction would cost 16x.
func testPurgeLinear(t *testing.T, s store.Store) {
	now := epoch.Add(60 * 24 * time.Hour)
	work := map[int]int64{}
	// The second session's messages are older than the first's, so the
	// second purge's cutoff examines only the second session.
	for i, c := range []int{20, 80} {
		created := epoch.Add(time.Duration(10-5*i) * 24 * time.Hour)
		sessionID := fmt.Sprintf("c%d", c)
		doomed := PurgeFixture(t, s, "t", sessionID, c, created, now)
		p, err := s.Purge(t.Context(), created.Add(time.Hour), now)
		if err != nil {
			t.Fatal(err)
		}
		if p.Messages != int64(doomed) {
			t.Fatalf("C=%d: purged %d messages; want the %d unreferenced ones", c, p.Messages, doomed)
		}
		kept := []string{"pad0", "o0_0_0", fmt.Sprintf("s%d_19", c-1), "s0_0", fmt.Sprintf("o%d_19_3", c-1)}
		if got, err := s.MessagesByID(t.Context(), "t", sessionID, kept); err != nil || len(got) != len(kept) {
			t.Errorf("C=%d: a kept message was purged: %v", c, err)
		}
		work[c] = p.Examined
	}
	ratio := float64(work[80]) / float64(work[20])
	t.Logf("purge work C=20: %d, C=80: %d, ratio %.2f", work[20], work[80], ratio)
	if ratio < 3 || ratio > 4.5 {
		t.Errorf("purge work C=80 / C=20 = %d / %d = %.2f; want about 4 (linear), not 16 (quadratic)", work[80], work[20], ratio)
	}
}

// BenchPurge times Purge over one session of C compactions (PurgeFixture)
// for C = 20, 40, 80. The first purge deletes the unreferenced messages;
// every later one examines the same session and keeps all of it, the cost
// a periodic purge pays for a long-lived session.
func BenchPurge(b *testing.B, newStore func(b *testing.B) store.Store) {
	now := epoch.Add(60 * 24 * time.Hour)
	for _, c := range []int{20, 40, 80} {
		b.Run(fmt.Sprintf("C=%d", c), func(b *testing.B) {
			s := newStore(b)
			PurgeFixture(b, s, "t", "s", c, epoch, now)
			var p store.Purged
			for b.Loop() {
				var err error
				if p, err = s.Purge(context.Background(), epoch.Add(time.Hour), now); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(p.Examined), "examined/op")
		})
	}
}
