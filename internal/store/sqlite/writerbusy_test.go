package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/store"
)

// TestWriterBusyCountsTheTurn: a durable call adds the time its group held
// the write turn (contextd_sqlite_writer_busy_seconds_total), its WAL's
// sync (contextd_sqlite_wal_sync_seconds_total), within the turn's time,
// and a group of one call; a resendable call adds turn time and no sync.
// Fails without InTx's clock (no turn time counted) or syncWAL's.
func TestWriterBusyCountsTheTurn(t *testing.T) {
	s := openTest(t)
	createSessions(t, s, 1)
	ctx := t.Context()
	turn0, sync0 := s.WriterBusy()
	groups0, calls0 := s.GroupStats()
	if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s0", 1) }); err != nil {
		t.Fatal(err)
	}
	turn1, sync1 := s.WriterBusy()
	if turn1 <= turn0 || sync1 <= sync0 || sync1-sync0 > turn1-turn0 {
		t.Fatalf("a durable call: turn %v and sync %v counted, want both, the sync within the turn", turn1-turn0, sync1-sync0)
	}
	if groups, calls := s.GroupStats(); groups-groups0 != 1 || calls-calls0 != 1 {
		t.Fatalf("a durable call: %d groups of %d calls, want one of one", groups-groups0, calls-calls0)
	}
	if err := s.InTx(store.Resendable(ctx), func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s0", 2) }); err != nil {
		t.Fatal(err)
	}
	if turn2, sync2 := s.WriterBusy(); turn2 <= turn1 || sync2 != sync1 {
		t.Fatalf("a resendable call: turn %v and sync %v counted, want the turn alone", turn2-turn1, sync2-sync1)
	}
}

// TestWriterBusyCountsRetention: retention's deletes hold the same write
// turn as the groups (lockWriter), so every other writer waits for them
// too; their time is the turn's, and not the groups'. Fails without
// lockWriter's clock: a purge adds no turn time.
func TestWriterBusyCountsRetention(t *testing.T) {
	s := openTest(t)
	createSessions(t, s, 1)
	ctx := t.Context()
	if err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return appendOne(ctx, tx, "s0", 1) }); err != nil {
		t.Fatal(err)
	}
	turn0, sync0 := s.WriterBusy()
	groups0, _ := s.GroupStats()
	now := time.Now()
	if _, err := s.Purge(ctx, now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	turn1, sync1 := s.WriterBusy()
	if groups1, _ := s.GroupStats(); groups1 != groups0 {
		t.Fatalf("the purge ran %d groups, want none (it holds the turn itself)", groups1-groups0)
	}
	if turn1 <= turn0 || sync1 != sync0 {
		t.Fatalf("a purge: turn %v and sync %v counted, want the turn alone", turn1-turn0, sync1-sync0)
	}
}
