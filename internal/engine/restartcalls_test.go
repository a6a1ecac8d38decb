package engine_test

import (
	"errors"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
)

// TestCompactedHistoryMakesAKeptCallOnce: a call made before a client's
// compacted history may be made again in it, once (pairToolCalls'
// restart); an ordinary append may not make a stored call again, and a
// compacted history may not make one twice. Each refusal is an invalid
// argument that changes nothing.
func TestCompactedHistoryMakesAKeptCallOnce(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := agentSession(t, e, compaction.Overrides{AutoCompact: ptr(false)}, 4)
		prepare := func(msgs []chat.Message, compacts bool) error {
			s, err := e.GetSession(ctx, tenant, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			in := engine.PrepareInput{Messages: msgs, ExpectedVersion: &s.Version}
			if compacts {
				in.Edits = []engine.ViewEdit{{Compaction: &engine.ClientCompactionInput{}}}
			}
			_, err = e.PrepareContext(ctx, tenant, v.ID, in)
			return err
		}
		logLen := func() int { return len(logOf(t, e, v.ID)) }
		n := logLen()
		var invalid *chat.InvalidError
		// An ordinary append makes call_3 again: refused.
		if err := prepare([]chat.Message{userMsg("go on"), callMsg("call_3"), resultMsg("call_3", "again")}, false); !errors.As(err, &invalid) {
			t.Errorf("an ordinary append making a stored call again: %v, want invalid", err)
		}
		// A compacted history making call_3 twice: refused.
		twice := []chat.Message{userMsg("Summary."), callMsg("call_3"), resultMsg("call_3", "kept"), callMsg("call_3"), resultMsg("call_3", "twice")}
		if err := prepare(twice, true); !errors.As(err, &invalid) {
			t.Errorf("a compacted history making a call twice: %v, want invalid", err)
		}
		if got := logLen(); got != n {
			t.Fatalf("refused appends changed the log: %d messages, had %d", got, n)
		}
		// Once: recorded, the view is the compacted history.
		if err := prepare(twice[:3], true); err != nil {
			t.Fatalf("a compacted history making its kept call once: %v", err)
		}
		if got, view := logLen(), activeOf(t, e, v.ID); got != n+3 || len(view) != 3 {
			t.Errorf("after the compaction: log %d (want %d), view %d (want 3)", got, n+3, len(view))
		}
		// The call's row names the message that made it last (FindCalls:
		// the age of a session's latest call is measured from it).
		if hits, err := e.FindCalls(ctx, tenant, []string{"call_3"}, 8); err != nil || len(hits) != 1 || hits[0].Position != int64(n+2) {
			t.Errorf("FindCalls(call_3) after the compaction made it again at %d: %+v, %v", n+2, hits, err)
		}
		// And an ordinary append after it may not make call_3 a third time.
		if err := prepare([]chat.Message{userMsg("more"), callMsg("call_3"), resultMsg("call_3", "third")}, false); !errors.As(err, &invalid) {
			t.Errorf("an ordinary append after the compaction making call_3 again: %v, want invalid", err)
		}
	})
}
