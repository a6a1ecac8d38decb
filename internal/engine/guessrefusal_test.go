package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// TestPrepareGuessedCallsRefusal: PrepareContext with an idempotency key
// (a read after the lock, which answers the held row's guards) and a tool
// result for a call answered before is refused with the stored rows'
// reason — the call already has a result — not the reason computed on the
// guess of the calls by id (store/postgres knowncalls.go), which takes an
// answered id for one never made. Fails with the guess's guard answered
// only when queued right after the lock's guards: "which no earlier
// assistant message made".
func TestPrepareGuessedCallsRefusal(t *testing.T) {
	ctx := t.Context()
	r := newLostCommitReplicas(t, 1)
	e, id := r.engines[0], r.session.ID
	for _, msgs := range [][]chat.Message{{userMsg("List the files.")}, {callMsg("c1")}, {resultMsg("c1", "a.go")}} {
		if _, err := e.PrepareContext(ctx, tenant, id, engine.PrepareInput{Messages: msgs}); err != nil { // held rows
			t.Fatal(err)
		}
	}
	_, err := e.PrepareContext(ctx, tenant, id, engine.PrepareInput{Messages: []chat.Message{resultMsg("c1", "b.go")}, IdempotencyKey: "k"})
	var invalid *chat.InvalidError
	if !errors.As(err, &invalid) || len(invalid.Violations) != 1 || !strings.Contains(invalid.Violations[0].Description, "already has a result") {
		t.Fatalf("a result for an answered call: %v; want refused, the call already having a result", err)
	}
}
