package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// testConcurrentCallsFailAlone runs many concurrent transactions of
// different sessions, as group commit (SQLite) puts them in one
// transaction: some fail after writing — by returning an error, or on a
// statement the store refuses (a duplicate position) — and each of those
// changes nothing, while every other call's write is stored exactly once.
func testConcurrentCallsFailAlone(t *testing.T, s store.Store) {
	const sessions, rounds = 12, 6
	for i := range sessions {
		create(t, s, session("t", fmt.Sprintf("s%d", i), epoch))
	}
	boom := errors.New("boom")
	fails := func(i, r int) int { return (i + r) % 3 } // 0: boom, 1: duplicate, 2: commits
	message := func(i, r int) chat.Message {
		return chat.Message{ID: fmt.Sprintf("m-%d-%d", i, r), Position: int64(r + 1), Role: chat.RoleUser, Kind: chat.KindNormal,
			Tokens: 1, CreatedAt: epoch, Parts: []chat.Part{{Type: chat.PartText, Text: fmt.Sprintf("session %d round %d", i, r)}}}
	}
	var wg sync.WaitGroup
	errs := make([][]error, sessions)
	for i := range sessions {
		errs[i] = make([]error, rounds)
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("s%d", i)
			for r := range rounds {
				errs[i][r] = s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
					if err := tx.InsertMessages(ctx, "t", id, []chat.Message{message(i, r)}); err != nil {
						return err
					}
					sess, err := tx.GetSession(ctx, "t", id)
					if err != nil {
						return err
					}
					sess.Version++
					sess.UpdatedAt = epoch.Add(time.Duration(r) * time.Second)
					if err := tx.UpdateSession(ctx, &sess); err != nil {
						return err
					}
					switch fails(i, r) {
					case 0:
						return boom
					case 1: // the position this call just wrote, again
						dup := message(i, r)
						dup.ID += "-again"
						return tx.InsertMessages(ctx, "t", id, []chat.Message{dup})
					}
					return nil
				})
			}
		}()
	}
	wg.Wait()
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		var want []string
		for r := range rounds {
			switch err := errs[i][r]; fails(i, r) {
			case 0:
				if !errors.Is(err, boom) {
					t.Errorf("%s round %d: %v, want the call's own error", id, r, err)
				}
			case 1:
				if !errors.Is(err, store.ErrAlreadyExists) {
					t.Errorf("%s round %d: %v, want ErrAlreadyExists", id, r, err)
				}
			default:
				if err != nil {
					t.Errorf("%s round %d: %v", id, r, err)
				}
				want = append(want, message(i, r).ID)
			}
		}
		log, err := s.LogMessages(t.Context(), "t", id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range log {
			got = append(got, m.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s log = %v, want %v (each committed call once, no failed call)", id, got, want)
		}
		sess, err := s.GetSession(t.Context(), "t", id)
		if err != nil {
			t.Fatal(err)
		}
		if sess.Version != 1+int64(len(want)) {
			t.Errorf("%s version %d, want %d (one per committed call)", id, sess.Version, 1+len(want))
		}
	}
}
