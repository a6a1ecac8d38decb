package gateway

import (
	"context"
	"testing"
	"time"
)

// TestTwinWaitsEndByTheRequestsDeadline: all the waits of one request
// (for a reply it carries, for a twin's call) end by one deadline, set
// where the request enters (waitsUntil of its arrival), however many
// times prepare's conflict loop runs identify. Here the request's
// deadline is spent (as by an earlier identify's wait on the same twin)
// and its twin's call never ends: the request goes on without waiting, in
// a session of its own. Before, each identify waited maxRecordWait from
// its own start, so a request matched again (a conflict, a session that
// moved) waited a minute more each time: here it waits on the twin until
// the test's watchdog ends its context, and fails.
func TestTwinWaitsEndByTheRequestsDeadline(t *testing.T) {
	g := newInProcess(t, nil)
	ctx := t.Context()
	first, sig := chatRequest(t, g, "", "user", "hello")
	was, _, _, err := g.prepare(ctx, "t", openAIChat{}, first, sig, waitsUntil(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	// The request extends the session; a call of its whole history (its
	// twin) is upstream in it and never ends.
	c, sig := chatRequest(t, g, "", "user", "hello", "assistant", "hi", "user", "more")
	twin := g.hold(ctx, "t", was.id, wholeHistory(c))
	defer twin.release()
	// The watchdog: the fix waits not at all; without it, a minute.
	watchdog, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, _, _, err := g.prepare(watchdog, "t", openAIChat{}, c, sig, time.Now())
	if err != nil {
		t.Fatalf("the request waited for its twin past its deadline (until its context ended): %v", err)
	}
	if res.id == was.id {
		t.Errorf("the request landed in %s, whose call is upstream", res.id)
	}
	select {
	case <-twin.pending:
		t.Fatal("the twin's call was released")
	default:
	}
}
