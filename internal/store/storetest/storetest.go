// Package storetest is the conformance suite every store backend passes:
// storetest.Run(t, newStore).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
)

// NewStore returns an empty store for one test; it closes it in t.Cleanup.
type NewStore func(t *testing.T) store.Store

// Run runs every conformance test against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"SessionLifecycle", testSessionLifecycle},
		{"DeleteUnusedSession", testDeleteUnusedSession},
		{"DeleteSessionAt", testDeleteSessionAt},
		{"DeleteSessionAtKeepsBilledWork", testDeleteSessionAtKeepsBilledWork},
		{"CloseIdleSessions", testCloseIdleSessions},
		{"TenantIsolation", testTenantIsolation},
		{"ListSessions", testListSessions},
		{"ListSummaries", testListSummaries},
		{"MessagesRoundTrip", testMessagesRoundTrip},
		{"MessagePaging", testMessagePaging},
		{"RowSizes", testRowSizes},
		{"DuplicatePosition", testDuplicatePosition},
		{"ToolCalls", testToolCalls},
		{"Idempotency", testIdempotency},
		{"Rollback", testRollback},
		{"Pipelined", testPipelined},
		{"ReadAhead", testReadAhead},
		{"SessionTools", testSessionTools},
		{"SessionToolsOfAnother", testSessionToolsOfAnother},
		{"ConcurrentCallsFailAlone", testConcurrentCallsFailAlone},
		{"CompactionsAndViews", testCompactionsAndViews},
		{"CompactionPaging", testCompactionPaging},
		{"Calibration", testCalibration},
		{"Purge", testPurge},
		{"PurgeLinear", testPurgeLinear},
		{"Ledger", testLedger},
		{"LedgerSaturates", testLedgerSaturates},
		{"PreparedView", testPreparedView},
		{"SetMessageTokens", testSetMessageTokens},
		{"Jobs", testJobs},
		{"JobLeasesAreExclusive", testJobLeasesAreExclusive},
		{"HistoryIndex", testHistoryIndex},
		{"FindCalls", testFindCalls},
		{"FindSummaries", testFindSummaries},
		{"JobRunningCapIsExact", testJobRunningCapIsExact},
		{"LogBytes", testLogBytes},
		{"CheckLogBytes", testCheckLogBytes},
		{"ViewGenerations", testViewGenerations},
		{"SweepDuringFlip", testSweepDuringFlip},
		{"DropDuringFlip", testDropDuringFlip},
		{"StrayViewGens", testStrayViewGens},
		{"AbandonedStagingSwept", testAbandonedStagingSwept},
		{"StrayPassesAreBounded", testStrayPassesAreBounded},
		{"StrayPassGoesRound", testStrayPassGoesRound},
		{"ForkSharesPrefix", testForkSharesPrefix},
		{"ForkOutlivesParent", testForkOutlivesParent},
		{"ForkRacesParentDelete", testForkRacesParentDelete},
		{"ForkHeir", testForkHeir},
		{"ForkHeirRacesItsDelete", testForkHeirRacesItsDelete},
		{"ForksPurgedTogether", func(t *testing.T, s store.Store) { ForksPurgedTogether(t, s, 20) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)

func session(tenant, id string, created time.Time) *store.Session {
	th := 0.6
	return &store.Session{
		Tenant: tenant, ID: id, Model: "gpt-4o", SystemPrompt: "Be brief. ✓",
		Tools:  []chat.Tool{{Name: "read", Description: "Read a file.", Parameters: `{"type":"object"}`}},
		Policy: compaction.Overrides{WarningThreshold: &th}, Labels: map[string]string{"team": "a"},
		Version: 1, SystemTokens: 10, ToolsTokens: 20, ActiveBytes: 30, CreatedAt: created, UpdatedAt: created,
	}
}

func inTx(t *testing.T, s store.Store, fn func(ctx context.Context, tx store.Tx) error) error {
	t.Helper()
	return s.InTx(t.Context(), fn)
}

func mustTx(t *testing.T, s store.Store, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	if err := inTx(t, s, fn); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, s store.Store, sess *store.Session) {
	t.Helper()
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, sess) })
}

func testSessionLifecycle(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := session("t1", "s1", epoch)
	create(t, s, in)
	got, err := s.GetSession(ctx, "t1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, in) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, *in)
	}
	err = inTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, in) })
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("duplicate insert: %v", err)
	}
	if _, err := s.GetSession(ctx, "t1", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
	// Update inside a transaction, reading with the locking GetSession.
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		cur, err := tx.GetSession(ctx, "t1", "s1")
		if err != nil {
			return err
		}
		cur.Version, cur.ActiveTokens, cur.ActiveCount, cur.LogCount, cur.ViewSeq = 2, 100, 3, 3, 3
		cur.ViewEpoch, cur.AnchorInput, cur.AnchorLocal, cur.AnchorCount, cur.AnchorEpoch = 2, 130, 100, 3, 2
		cur.UpdatedAt = epoch.Add(time.Second)
		return tx.UpdateSession(ctx, &cur)
	})
	got, _ = s.GetSession(ctx, "t1", "s1")
	if got.Version != 2 || got.ActiveTokens != 100 || got.LogCount != 3 || got.AnchorInput != 130 || got.AnchorEpoch != 2 || !got.UpdatedAt.Equal(epoch.Add(time.Second)) || !got.CreatedAt.Equal(epoch) {
		t.Errorf("after update: %+v", got)
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t1", "s1") })
	if _, err := s.GetSession(ctx, "t1", "s1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	for name, fn := range map[string]func(context.Context, store.Tx) error{
		"delete again": func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t1", "s1") },
		"update":       func(ctx context.Context, tx store.Tx) error { return tx.UpdateSession(ctx, in) },
		"locking get": func(ctx context.Context, tx store.Tx) error {
			_, err := tx.GetSession(ctx, "t1", "s1")
			return err
		},
	} {
		if err := inTx(t, s, fn); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s after delete: %v", name, err)
		}
	}
	// A deleted session's id is free again (its archive goes with it); a
	// live one's is not.
	if err := inTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, in) }); err != nil {
		t.Errorf("reusing a deleted id: %v", err)
	}
	if err := inTx(t, s, func(ctx context.Context, tx store.Tx) error { _, err := tx.GetSession(ctx, "t1", "s1"); return err }); err != nil {
		t.Errorf("the re-created session: %v", err)
	}
	err = inTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.InsertSession(ctx, in) })
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("reusing a live id: %v", err)
	}
}

func testTenantIsolation(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, session("a", "same", epoch))
	create(t, s, session("b", "same", epoch))
	create(t, s, session("a", "only-a", epoch))
	if _, err := s.GetSession(ctx, "b", "only-a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other tenant's session is visible: %v", err)
	}
	err := inTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "b", "only-a") })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other tenant's session is deletable: %v", err)
	}
	list, err := s.ListSessions(ctx, "b", store.ListFilter{Limit: 10})
	if err != nil || len(list) != 1 || list[0].Tenant != "b" {
		t.Errorf("tenant b lists %+v, %v", list, err)
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if n, err := tx.CountSessions(ctx, "a"); err != nil || n != 2 {
			t.Errorf("tenant a counts %d sessions (%v), want 2", n, err)
		}
		return nil
	})
}

func testListSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i := range 7 {
		sess := session("t", fmt.Sprintf("s%d", i), epoch.Add(time.Duration(i/2)*time.Minute)) // pairs share a time
		if i%3 == 0 {
			sess.Labels = map[string]string{"team": "b", "env": "prod"}
		}
		create(t, s, sess)
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, "t", "s5") })
	var ids []string
	f := store.ListFilter{Limit: 2}
	for {
		page, err := s.ListSessions(ctx, "t", f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			ids = append(ids, p.ID)
		}
		if len(page) < f.Limit {
			break
		}
		last := page[len(page)-1]
		f.Before = &store.SessionCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	if want := []string{"s6", "s4", "s3", "s2", "s1", "s0"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("paged listing %v, want %v", ids, want)
	}
	page, err := s.ListSessions(ctx, "t", store.ListFilter{Limit: 10, Labels: map[string]string{"team": "b", "env": "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range page {
		got = append(got, p.ID)
	}
	if want := []string{"s6", "s3", "s0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("label filter %v, want %v", got, want)
	}
}

// sampleMessages covers every part type, odd text and metadata.
func sampleMessages() []chat.Message {
	at := epoch.Add(time.Hour)
	return []chat.Message{
		{ID: "m1", Position: 1, Role: chat.RoleUser, Kind: chat.KindNormal, Tokens: 7, CreatedAt: at,
			Parts:    []chat.Part{{Type: chat.PartText, Text: "héllo \"quotes\" \\ \n\ttabs 中文 😀 \u2028"}},
			Metadata: map[string]string{"k": "v"}, Name: "alice", Pinned: true},
		{ID: "m2", Position: 2, Role: chat.RoleAssistant, Kind: chat.KindNormal, Tokens: 9, CreatedAt: at,
			Parts: []chat.Part{{Type: chat.PartText, Text: "calling"}, {Type: chat.PartToolCall,
				ToolCall: &chat.ToolCall{ID: "c1", Name: "read", Arguments: `{"path": "a.go"}`}}}},
		{ID: "m3", Position: 3, Role: chat.RoleTool, Kind: chat.KindNormal, Tokens: 4, CreatedAt: at,
			Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c1", Content: "package a", IsError: true}}}},
		{ID: "m4", Position: 4, Role: chat.RoleUser, Kind: chat.KindNormal, Tokens: 800, CreatedAt: at,
			Parts: []chat.Part{{Type: chat.PartImage, Image: &chat.Image{MediaType: "image/png", Width: 10, Height: 20, Detail: "low"}}}},
	}
}

func insertMessages(t *testing.T, s store.Store, tenant, id string, msgs []chat.Message) {
	t.Helper()
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertMessages(ctx, tenant, id, msgs); err != nil {
			return err
		}
		entries := make([]store.ViewEntry, len(msgs))
		for i, m := range msgs {
			entries[i] = store.ViewEntry{Ord: m.Position, MessageID: m.ID}
		}
		return tx.AppendView(ctx, tenant, id, entries)
	})
}

func testMessagesRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, session("t", "s", epoch))
	want := sampleMessages()
	insertMessages(t, s, "t", "s", want)
	active, ords, err := s.ActiveMessages(ctx, "t", "s", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(active, want) || !reflect.DeepEqual(ords, []int64{1, 2, 3, 4}) {
		t.Errorf("active view:\n got %+v\nwant %+v", active, want)
	}
	log, err := s.LogMessages(ctx, "t", "s", 0, 100)
	if err != nil || !reflect.DeepEqual(log, want) {
		t.Errorf("log: %v\n got %+v", err, log)
	}
	if other, _, err := s.ActiveMessages(ctx, "other", "s", 0, 100); err != nil || len(other) != 0 {
		t.Errorf("other tenant sees %d messages (%v)", len(other), err)
	}
}

func testMessagePaging(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, session("t", "s", epoch))
	var msgs []chat.Message
	for i := int64(1); i <= 25; i++ {
		msgs = append(msgs, chat.Message{ID: fmt.Sprintf("m%d", i), Position: i, Role: chat.RoleUser, Kind: chat.KindNormal,
			Parts: []chat.Part{{Type: chat.PartText, Text: fmt.Sprint(i)}}, Tokens: i, CreatedAt: epoch})
	}
	insertMessages(t, s, "t", "s", msgs)
	var seen []int64
	for after := int64(0); ; {
		page, ords, err := s.ActiveMessages(ctx, "t", "s", after, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			seen = append(seen, m.Position)
		}
		after = ords[len(ords)-1]
	}
	if len(seen) != 25 || seen[0] != 1 || seen[24] != 25 {
		t.Errorf("paged active view: %v", seen)
	}
	page, err := s.LogMessages(ctx, "t", "s", 20, 10)
	if err != nil || len(page) != 5 || page[0].Position != 21 {
		t.Errorf("log page after 20: %d messages, %v", len(page), err)
	}
}

func testDuplicatePosition(t *testing.T, s store.Store) {
	create(t, s, session("t", "s", epoch))
	insertMessages(t, s, "t", "s", sampleMessages()[:1])
	dup := sampleMessages()[:1]
	dup[0].ID = "other-id"
	err := inTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.InsertMessages(ctx, "t", "s", dup) })
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("duplicate position: %v", err)
	}
}

func testToolCalls(t *testing.T, s store.Store) {
	create(t, s, session("t", "s", epoch))
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{{CallID: "a", Position: 2}, {CallID: "b", Position: 2}})
	})
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.PutToolCalls(ctx, "t", "s", []store.ToolCall{{CallID: "a", Position: 2, ResultPosition: 3}})
	})
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.ToolCalls(ctx, "t", "s", []string{"a", "b", "c"})
		if err != nil {
			return err
		}
		want := map[string]store.ToolCall{"a": {CallID: "a", Position: 2, ResultPosition: 3}, "b": {CallID: "b", Position: 2}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("tool calls %+v, want %+v", got, want)
		}
		open, err := tx.OpenToolCalls(ctx, "t", "s")
		if err != nil {
			return err
		}
		if want := []store.ToolCall{{CallID: "b", Position: 2}}; !reflect.DeepEqual(open, want) {
			t.Errorf("open tool calls %+v, want %+v", open, want)
		}
		open, err = tx.OpenToolCalls(ctx, "t", "other")
		if err != nil || len(open) != 0 {
			t.Errorf("open tool calls of another session: %+v, %v", open, err)
		}
		return nil
	})
}

func testIdempotency(t *testing.T, s store.Store) {
	create(t, s, session("t", "s", epoch))
	rec := store.Idempotency{Key: "k", RequestHash: "h", Response: []byte{0, 1, 2, 255}}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.PutIdempotency(ctx, "t", "s", rec) })
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetIdempotency(ctx, "t", "s", "k")
		if err != nil || !reflect.DeepEqual(got, rec) {
			t.Errorf("got %+v, %v", got, err)
		}
		if _, err := tx.GetIdempotency(ctx, "t", "s", "other"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing key: %v", err)
		}
		return nil
	})
	err := inTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.PutIdempotency(ctx, "t", "s", rec) })
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("duplicate key: %v", err)
	}
}

func testRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	boom := errors.New("boom")
	err := inTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertSession(ctx, session("t", "s", epoch)); err != nil {
			return err
		}
		if err := tx.InsertMessages(ctx, "t", "s", sampleMessages()); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx returned %v, want the closure's error", err)
	}
	if _, err := s.GetSession(ctx, "t", "s"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("rolled-back session is visible: %v", err)
	}
}

func testCompactionsAndViews(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, session("t", "s", epoch))
	msgs := sampleMessages()
	insertMessages(t, s, "t", "s", msgs)
	summary := chat.Message{ID: "sum-1", Role: chat.RoleUser, Kind: chat.KindSummary, Tokens: 5, CreatedAt: epoch,
		Parts: []chat.Part{{Type: chat.PartText, Text: "summary"}}, Replaces: []string{"m1", "m2", "m3"}}
	rec := &store.Compaction{ID: "c1", Round: 1, Tiers: []string{"prune", "summarize"}, TokensBefore: 820, TokensAfter: 805,
		Items:   []store.CompactionItem{{Tier: "summarize", NewID: "sum-1", Replaced: []string{"m1", "m2", "m3"}, Reason: "r", TokensBefore: 20, TokensAfter: 5}},
		Summary: "summary", ViewBefore: []string{"m1", "m2", "m3", "m4"}, ViewAfter: []string{"sum-1", "m4"},
		CreatedAt: epoch, ExpiresAt: epoch.Add(24 * time.Hour)}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.LockCompaction(ctx, "t", "s"); err != nil {
			return err
		}
		if err := tx.InsertMessages(ctx, "t", "s", []chat.Message{summary}); err != nil {
			return err
		}
		if err := tx.ReplaceView(ctx, "t", "s", rec.ViewAfter); err != nil {
			return err
		}
		return tx.InsertCompaction(ctx, "t", "s", rec)
	})
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		view, err := tx.ViewMessages(ctx, "t", "s")
		if err != nil {
			return err
		}
		if len(view) != 2 || !reflect.DeepEqual(view[0], summary) || !reflect.DeepEqual(view[1], msgs[3]) {
			t.Errorf("view after replace: %+v", view)
		}
		got, err := tx.GetCompaction(ctx, "t", "s", "c1")
		if err != nil || !reflect.DeepEqual(&got, rec) {
			t.Errorf("compaction round trip:\n got %+v\nwant %+v (%v)", got, *rec, err)
		}
		if _, err := tx.GetCompaction(ctx, "t", "s", "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing compaction: %v", err)
		}
		return tx.MarkReverted(ctx, "t", "s", "c1", epoch.Add(time.Hour))
	})
	list, err := s.ListCompactions(ctx, "t", "s", 0, 10)
	if err != nil || len(list) != 1 || list[0].RevertedAt == nil || !list[0].RevertedAt.Equal(epoch.Add(time.Hour)) {
		t.Errorf("list: %+v, %v", list, err)
	}
	if latest, err := s.LatestCompaction(ctx, "t", "s"); err != nil || latest.ID != "c1" {
		t.Errorf("latest: %+v, %v", latest, err)
	}
	if _, err := s.LatestCompaction(ctx, "t", "none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("latest of a session without compactions: %v", err)
	}
	byID, err := s.MessagesByID(ctx, "t", "s", []string{"m3", "sum-1", "m1"})
	if err != nil || len(byID) != 3 || byID[0].ID != "m3" || byID[1].ID != "sum-1" || byID[2].ID != "m1" ||
		!reflect.DeepEqual(byID[1].Replaces, summary.Replaces) {
		t.Errorf("by id: %+v, %v", byID, err)
	}
	if _, err := s.MessagesByID(ctx, "t", "s", []string{"m1", "ghost"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing id: %v", err)
	}
	// The log is untouched by view changes.
	log, err := s.LogMessages(ctx, "t", "s", 0, 100)
	if err != nil || !reflect.DeepEqual(log, msgs) {
		t.Errorf("log changed: %v", err)
	}
}

// testCompactionPaging: ListCompactions reads a page after a round, in round
// order, and only the session's. Replicas' clocks differ, so created_at may
// run backwards or repeat across rounds: it never decides the order.
func testCompactionPaging(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, session("t", "s", epoch))
	create(t, s, session("t", "other", epoch))
	var want []string
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		for round := 1; round <= 7; round++ {
			at := epoch.Add(time.Duration((8-round)/2) * time.Second) // later rounds earlier; rounds 2 and 3, 4 and 5, 6 and 7 share a time
			c := &store.Compaction{ID: fmt.Sprintf("c%d", round), Round: round, ViewBefore: []string{}, ViewAfter: []string{},
				CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
			want = append(want, c.ID)
			if err := tx.InsertCompaction(ctx, "t", "s", c); err != nil {
				return err
			}
			c.ID = "x" + c.ID
			if err := tx.InsertCompaction(ctx, "t", "other", c); err != nil {
				return err
			}
		}
		return nil
	})
	var got []string
	after := 0
	for pages := 0; ; pages++ {
		page, err := s.ListCompactions(ctx, "t", "s", after, 3)
		if err != nil || len(page) > 3 || pages > 3 {
			t.Fatalf("page %d: %d compactions, %v", pages, len(page), err)
		}
		for _, c := range page {
			got = append(got, c.ID)
		}
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].Round
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("paged listing %v, want %v", got, want)
	}
	if none, err := s.ListCompactions(ctx, "t", "nobody", 0, 3); err != nil || len(none) != 0 {
		t.Errorf("a session without compactions: %d, %v", len(none), err)
	}
}

func testCalibration(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.GetCalibration(ctx, "t", "claude-sonnet-4-5"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing calibration: %v", err)
	}
	for _, c := range []store.Calibration{{Model: "claude-sonnet-4-5", Ratio: 1.25, Samples: 1, UpdatedAt: epoch},
		{Model: "claude-sonnet-4-5", Ratio: 1.3, Samples: 2, UpdatedAt: epoch.Add(time.Second)}} {
		mustTx(t, s, func(ctx context.Context, tx store.Tx) error { return tx.PutCalibration(ctx, "t", c) })
	}
	got, err := s.GetCalibration(ctx, "t", "claude-sonnet-4-5")
	if err != nil || got.Ratio != 1.3 || got.Samples != 2 || !got.UpdatedAt.Equal(epoch.Add(time.Second)) {
		t.Errorf("calibration: %+v, %v", got, err)
	}
	if _, err := s.GetCalibration(ctx, "other-tenant", "claude-sonnet-4-5"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("calibrations leak across tenants: %v", err)
	}
}

// testPurge: retention removes deleted sessions and unreferenced old
// originals, and never the active view or what a revertible compaction needs.
func testPurge(t *testing.T, s store.Store) {
	ctx := t.Context()
	old, now := epoch, epoch.Add(60*24*time.Hour)
	create(t, s, session("t", "live", old))
	create(t, s, session("t", "gone", old))
	msg := func(id string, pos int64) chat.Message {
		return chat.Message{ID: id, Position: pos, Role: chat.RoleUser, Kind: chat.KindNormal, Tokens: 1, CreatedAt: old,
			Parts: []chat.Part{{Type: chat.PartText, Text: id}}}
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		// m1: in the view. m2: replaced by an expired compaction. m3: needed by
		// a compaction that can still be reverted. m4: replaced by the summary
		// s1 of an expired compaction, and s1 is in the view (its text tells
		// the model to expand it). Nested (repeated compactions): s2 replaced
		// m5, then s3 replaced s2 and m6, then s4 replaced s3; s4 is in the
		// view, so s3, s2, m5 and m6 all stay expandable. s5 replaced m7 and
		// is in the view the revertible c2 restores, so m7 stays too; m8,
		// behind s6 which nothing can bring back, goes.
		if err := tx.InsertMessages(ctx, "t", "live", []chat.Message{msg("m1", 1), msg("m2", 2), msg("m3", 3), msg("m4", 4), msg("s1", 5),
			msg("m5", 6), msg("s2", 7), msg("m6", 8), msg("s3", 9), msg("s4", 10), msg("m7", 11), msg("s5", 12), msg("m8", 13), msg("s6", 14)}); err != nil {
			return err
		}
		if err := tx.AppendView(ctx, "t", "live", []store.ViewEntry{{Ord: 1, MessageID: "m1"}, {Ord: 2, MessageID: "s1"}, {Ord: 3, MessageID: "s4"}}); err != nil {
			return err
		}
		for _, c := range []*store.Compaction{
			{ID: "c1", Round: 1, ViewBefore: []string{"m1", "m2"}, ViewAfter: []string{"m1"}, CreatedAt: old, ExpiresAt: old.Add(24 * time.Hour)},
			{ID: "c2", Round: 2, ViewBefore: []string{"m1", "m3", "s5"}, ViewAfter: []string{"m1"}, CreatedAt: old, ExpiresAt: now.Add(time.Hour)},
			{ID: "c3", Round: 3, ViewBefore: []string{"m1", "m4"}, ViewAfter: []string{"m1", "s1"}, CreatedAt: old, ExpiresAt: old.Add(24 * time.Hour),
				Items: []store.CompactionItem{{Tier: "summarize", NewID: "s1", Replaced: []string{"m4"}}}},
			{ID: "c4", Round: 4, CreatedAt: old, ExpiresAt: old.Add(24 * time.Hour),
				Items: []store.CompactionItem{{Tier: "summarize", NewID: "s2", Replaced: []string{"m5"}}, {Tier: "summarize", NewID: "s5", Replaced: []string{"m7"}}}},
			{ID: "c5", Round: 5, CreatedAt: old, ExpiresAt: old.Add(24 * time.Hour),
				Items: []store.CompactionItem{{Tier: "summarize", NewID: "s3", Replaced: []string{"s2", "m6"}}, {Tier: "summarize", NewID: "s6", Replaced: []string{"m8"}}}},
			{ID: "c6", Round: 6, CreatedAt: old, ExpiresAt: old.Add(24 * time.Hour),
				Items: []store.CompactionItem{{Tier: "summarize", NewID: "s4", Replaced: []string{"s3"}}}},
		} {
			if err := tx.InsertCompaction(ctx, "t", "live", c); err != nil {
				return err
			}
		}
		if err := tx.PutIdempotency(ctx, "t", "live", store.Idempotency{Key: "k", RequestHash: "h", Response: []byte("{}")}); err != nil {
			return err
		}
		return tx.DeleteSession(ctx, "t", "gone")
	})
	p, err := s.Purge(ctx, now.Add(-30*24*time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	// The deleted session was deleted "now" (wall clock), after the cutoff:
	// it stays until its own retention ends.
	if p.Sessions != 0 || p.Messages != 3 {
		t.Errorf("purged %+v; want only m2, s6 and m8", p)
	}
	kept := []string{"m1", "m3", "m4", "s1", "m5", "s2", "m6", "s3", "s4", "m7", "s5"}
	if got, err := s.MessagesByID(ctx, "t", "live", kept); err != nil || len(got) != len(kept) {
		t.Errorf("the view, a revertible original or one behind a (nested) summary in the view was purged: %v", err)
	}
	for _, id := range []string{"m2", "s6", "m8"} {
		if _, err := s.MessagesByID(ctx, "t", "live", []string{id}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s survived: %v", id, err)
		}
	}
	p, err = s.Purge(ctx, time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	if err != nil || p.Sessions != 1 || p.IdempotencyKeys != 1 {
		t.Errorf("second purge: %+v, %v", p, err)
	}
}

func testSetMessageTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, session("t", "s", epoch))
	create(t, s, session("other", "s", epoch))
	msgs := sampleMessages()
	msgs[1].CountedFor = "enc-a/frame-1"
	insertMessages(t, s, "t", "s", msgs)
	insertMessages(t, s, "other", "s", msgs)
	ids := []string{msgs[0].ID, msgs[1].ID, msgs[2].ID}
	got, err := s.MessagesByID(ctx, "t", "s", ids)
	if err != nil || got[0].CountedFor != "" || got[1].CountedFor != "enc-a/frame-1" {
		t.Errorf("counted_for as inserted: %+v, %v", got, err)
	}
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.SetMessageTokens(ctx, "t", "s", map[string]int64{msgs[0].ID: 7, msgs[2].ID: 9}, "enc-b/frame-2")
	})
	got, err = s.MessagesByID(ctx, "t", "s", ids)
	if err != nil || got[0].Tokens != 7 || got[1].Tokens != msgs[1].Tokens || got[2].Tokens != 9 {
		t.Errorf("tokens after set: %+v, %v", got, err)
	}
	if got[0].CountedFor != "enc-b/frame-2" || got[1].CountedFor != "enc-a/frame-1" || got[2].CountedFor != "enc-b/frame-2" {
		t.Errorf("counted_for after set: %q %q %q", got[0].CountedFor, got[1].CountedFor, got[2].CountedFor)
	}
	var view []chat.Message
	mustTx(t, s, func(ctx context.Context, tx store.Tx) (err error) {
		view, err = tx.ViewMessages(ctx, "t", "s")
		return err
	})
	for _, m := range view {
		if m.ID == msgs[0].ID && m.CountedFor != "enc-b/frame-2" {
			t.Errorf("view read of counted_for: %q", m.CountedFor)
		}
	}
	// An empty key stores "unknown" again.
	mustTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.SetMessageTokens(ctx, "t", "s", map[string]int64{msgs[1].ID: 5}, "")
	})
	if got, err = s.MessagesByID(ctx, "t", "s", ids[1:2]); err != nil || got[0].Tokens != 5 || got[0].CountedFor != "" {
		t.Errorf("unknown counted_for: %+v, %v", got, err)
	}
	other, err := s.MessagesByID(ctx, "other", "s", []string{msgs[0].ID})
	if err != nil || other[0].Tokens != msgs[0].Tokens || other[0].CountedFor != "" {
		t.Errorf("another tenant's message changed: %+v, %v", other, err)
	}
	err = inTx(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.SetMessageTokens(ctx, "t", "s", map[string]int64{"ghost": 1}, "enc-b/frame-2")
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
}

// testRowSizes: ActiveSizes and LogSizes list the rows ActiveMessages and
// LogMessages would, with each row's stored size (larger for a larger
// message), paged the same way.
func testRowSizes(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, session("t", "s", epoch))
	var msgs []chat.Message
	for i := int64(1); i <= 5; i++ {
		msgs = append(msgs, chat.Message{ID: fmt.Sprintf("m%d", i), Position: i, Role: chat.RoleUser, Kind: chat.KindNormal,
			Parts: []chat.Part{{Type: chat.PartText, Text: strings.Repeat("x", int(i)*1000)}}, Tokens: i, CreatedAt: epoch})
	}
	insertMessages(t, s, "t", "s", msgs)
	active, err := s.ActiveSizes(ctx, "t", "s", 1, 3)
	if err != nil || len(active) != 3 || active[0].Cursor != 2 || active[0].ID != "m2" || active[2].ID != "m4" {
		t.Fatalf("active sizes after 1: %+v, %v", active, err)
	}
	if active[0].Bytes < 2000 || active[1].Bytes-active[0].Bytes < 1000 {
		t.Errorf("sizes do not follow the messages: %+v", active)
	}
	log, err := s.LogSizes(ctx, "t", "s", 3, 10)
	if err != nil || len(log) != 2 || log[0].Cursor != 4 || log[1].ID != "m5" || log[1].Bytes < 5000 {
		t.Errorf("log sizes after 3: %+v, %v", log, err)
	}
	if other, err := s.ActiveSizes(ctx, "other", "s", 0, 10); err != nil || len(other) != 0 {
		t.Errorf("other tenant sees %d rows (%v)", len(other), err)
	}
}
