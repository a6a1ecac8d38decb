package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
)

// BenchmarkAppendOneMessage is the store's side of a gateway append to a
// conversation of 2,000 messages: one pipelined transaction that locks the
// session, reads its open tool calls, inserts a message with its history
// entry (the new head), checks the tenant's log quota, appends its view
// entry and writes the session row — the statements each gateway request
// runs twice (PrepareContext's and the recording's, docs/performance.md),
// committed without an fsync; without tools, and with a coding agent's 30
// tools (about 60 KB of JSON) on the session.
func BenchmarkAppendOneMessage(b *testing.B) {
	for _, n := range []int{0, 30} {
		b.Run(fmt.Sprint("tools=", n), func(b *testing.B) { benchAppend(b, n) })
	}
}

func benchAppend(b *testing.B, nTools int) {
	var tools []chat.Tool
	for i := range nTools {
		tools = append(tools, chat.Tool{Name: fmt.Sprint("tool_", i), Description: strings.Repeat("Does one thing of a coding agent's. ", 20),
			Parameters: `{"type":"object","properties":{"path":{"type":"string","description":"` + strings.Repeat("A path. ", 150) + `"}}}`})
	}
	s, err := sqlite.Open(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	now := time.Unix(1_700_000_000, 0).UTC()
	msg := func(pos int64) chat.Message {
		return chat.Message{ID: fmt.Sprint("msg_", pos), Position: pos, Kind: chat.KindNormal, CreatedAt: now, Tokens: 10,
			Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: strings.Repeat("a line of the conversation ", 8)}},
			Metadata: map[string]string{store.HistoryMetadata: fmt.Sprintf("%d:%032x", pos, pos)}}
	}
	const start = 2000
	err = s.InTx(b.Context(), func(ctx context.Context, tx store.Tx) error {
		if err := tx.InsertSession(ctx, &store.Session{Tenant: "t", ID: "s", Model: "gpt-4o", Tools: tools, Version: 1, LogCount: start, ViewSeq: start, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		var msgs []chat.Message
		for pos := int64(1); pos <= start; pos++ {
			msgs = append(msgs, msg(pos))
		}
		if err := tx.InsertMessages(ctx, "t", "s", msgs); err != nil {
			return err
		}
		return tx.AppendView(ctx, "t", "s", store.Entries(func() []string {
			ids := make([]string, len(msgs))
			for i := range msgs {
				ids[i] = msgs[i].ID
			}
			return ids
		}(), 0))
	})
	if err != nil {
		b.Fatal(err)
	}
	// Resendable and pipelined, as the gateway's PrepareContext: no
	// fsync, so the figure is the statements' work.
	ctx := store.Pipelined(store.Resendable(b.Context()))
	over := errors.New("over the quota")
	cpu0 := processCPU()
	for b.Loop() {
		err := s.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			sess, err := tx.GetSession(ctx, "t", "s")
			if err != nil {
				return err
			}
			if _, err := tx.OpenToolCalls(ctx, "t", "s"); err != nil {
				return err
			}
			m := msg(sess.LogCount + 1)
			if err := tx.InsertMessages(ctx, "t", "s", []chat.Message{m}); err != nil {
				return err
			}
			if err := tx.CheckLogBytes(ctx, "t", 1<<40, over); err != nil {
				return err
			}
			if err := tx.AppendView(ctx, "t", "s", []store.ViewEntry{{Ord: sess.ViewSeq + 1, MessageID: m.ID}}); err != nil {
				return err
			}
			sess.Version++
			sess.LogCount++
			sess.ViewSeq++
			return tx.UpdateSession(ctx, &sess)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	// The process's CPU (the checkpointer's included), which a loaded
	// machine disturbs less than the time.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the CPU time the process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
