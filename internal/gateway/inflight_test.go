package gateway

import (
	"context"
	"testing"
	"time"
)

// TestBusyFreesAbandonedCalls: a session whose call is upstream is busy
// until the call ends — unless the call's client went away, which a
// client that gave up on a hanging provider and retries did: its retry
// lands in the session. A call whose answer is being recorded keeps the
// session busy (waited for), its client gone or not. Before, the session
// stayed busy while the abandoned call unwound, and under load the
// client's retry went on in a copy of the session (a "rewound" fork), so
// the first session never got the reply (TestUpstreamFailuresKeepOneTurn's
// flake).
func TestBusyFreesAbandonedCalls(t *testing.T) {
	g := &Gateway{}
	ctx := context.Background()
	soon := func() time.Time { return time.Now().Add(50 * time.Millisecond) }
	client, leave := context.WithCancel(ctx)
	h := g.hold(client, "t", "s", "")
	defer h.release()
	if !g.busy(ctx, "t", "s", "", soon()) {
		t.Fatal("a call upstream does not keep its session busy")
	}
	leave()
	if g.busy(ctx, "t", "s", "", soon()) {
		t.Fatal("a call whose client went away keeps its session busy")
	}
	// A call that claimed its reply (its answer went out whole) before its
	// client went away, and whose answer is being recorded: busy until the
	// recording ends (here it does not, within until).
	client3, leave3 := context.WithCancel(ctx)
	h3 := g.hold(client3, "t", "s3", "")
	defer h3.release()
	h3.claimReply()
	leave3()
	h3.markRecording("t", resolved{id: "s3"})
	h3.recording = true
	if !g.busy(ctx, "t", "s3", "", soon()) {
		t.Fatal("a session whose answer is being recorded is not busy")
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		h3.release()
	}()
	if g.busy(ctx, "t", "s3", "", time.Now().Add(10*time.Second)) {
		t.Fatal("a session whose recording ended is busy")
	}
	if g.busy(ctx, "t", "other", "", soon()) {
		t.Fatal("a session with no call is busy")
	}
}

// TestAbandonedCallClaimsNoReply: once busy has let another request into
// the session of a call whose client went away, that call records no
// reply (the client never had it whole; the other request's is the one
// it will carry), and a call that claimed its reply before its client
// went away keeps the session busy. Before, an abandoned call whose
// answer came after busy found the session free recorded its reply in
// the session the retry had joined, so the retry's own reply was left
// out and the client's next request, carrying it, forked.
func TestAbandonedCallClaimsNoReply(t *testing.T) {
	g := &Gateway{}
	ctx := context.Background()
	soon := func() time.Time { return time.Now().Add(50 * time.Millisecond) }

	client, leave := context.WithCancel(ctx)
	h := g.hold(client, "t", "s", "")
	defer h.release()
	leave()
	if g.busy(ctx, "t", "s", "", soon()) {
		t.Fatal("a call whose client went away keeps its session busy")
	}
	if h.claimReply() {
		t.Fatal("a call whose session went to another request may still record its reply")
	}
	if g.busy(ctx, "t", "s", "", soon()) {
		t.Fatal("a refused claim made the session busy again")
	}

	client2, leave2 := context.WithCancel(ctx)
	h2 := g.hold(client2, "t", "s2", "")
	defer h2.release()
	if !h2.claimReply() {
		t.Fatal("a call whose client is there may not record its reply")
	}
	leave2()
	if !g.busy(ctx, "t", "s2", "", soon()) {
		t.Fatal("a call that claimed its reply before its client went away does not keep its session busy")
	}
	if !h2.claimReply() {
		t.Fatal("a claimed reply was taken back")
	}
}

// TestBusyWaitsForTwins: a session whose call upstream is the request's
// twin (the same whole history) is waited for, and free once the call is
// released; a call of another history, or the same session id and history
// of another tenant, is not waited for (busy, or free, at once); the wait
// ends by until, or when the waiting request's own client goes away, and
// the session is then busy.
func TestBusyWaitsForTwins(t *testing.T) {
	g := &Gateway{}
	ctx := context.Background()
	soon := func() time.Time { return time.Now().Add(50 * time.Millisecond) }
	long := time.Now().Add(time.Minute)

	h := g.hold(ctx, "a", "s", "H")
	defer h.release()
	at := time.Now()
	if !g.busy(ctx, "a", "s", "other", long) || time.Since(at) > 10*time.Second {
		t.Fatal("a call of another history is waited for, or not busy")
	}
	if g.busy(ctx, "b", "s", "H", long) || time.Since(at) > 10*time.Second {
		t.Fatal("another tenant's call of the same session id and history is waited for, or busy")
	}
	at = time.Now()
	if !g.busy(ctx, "a", "s", "H", soon()) {
		t.Fatal("a twin's call still upstream at until: not busy")
	}
	if time.Since(at) < 40*time.Millisecond {
		t.Fatal("a twin's call upstream was not waited for")
	}
	gone, leave := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, leave)
	at = time.Now()
	if !g.busy(gone, "a", "s", "H", long) || time.Since(at) > 10*time.Second {
		t.Fatal("a request whose client went away waits on, or finds its twin's session free")
	}
	time.AfterFunc(20*time.Millisecond, h.release)
	if g.busy(ctx, "a", "s", "H", long) {
		t.Fatal("a twin's session is busy after its call was released")
	}
}

// TestAsideRecordingLeavesARoundsMark: a repeat's or an aside's call does
// not hold its session (holdCall), so a round of the same session may be
// recorded at the same time. The session's recording mark (recordingKey)
// is the round's: the aside's recording, which appends nothing, does not
// take it over. It did (both marked the one key, the later winning), and
// the aside's recording, ending first, removed the mark: a request then
// found the session's call still held by the round's recording, not being
// recorded, and went on without it (a fork) instead of waiting the few
// writes.
func TestAsideRecordingLeavesARoundsMark(t *testing.T) {
	g := &Gateway{}
	ctx := context.Background()
	round := g.holdCall(ctx, "t", resolved{id: "s"}, &conversation{})
	defer round.release()
	round.claimReply()
	round.markRecording("t", resolved{id: "s"})
	round.recording = true
	asideRes := resolved{id: "s", history: historyAside}
	aside := g.holdCall(ctx, "t", asideRes, &conversation{})
	aside.claimReply()
	aside.markRecording("t", asideRes)
	aside.recording = true
	aside.release() // the aside's recording ended first
	go func() {
		time.Sleep(20 * time.Millisecond)
		round.release()
	}()
	if g.busy(ctx, "t", "s", "", time.Now().Add(10*time.Second)) {
		t.Fatal("a session whose round is being recorded is busy (not waited for) once an aside's recording ended")
	}
	// An aside recorded alone marks the session, as before.
	alone := g.holdCall(ctx, "t", asideRes, &conversation{})
	alone.markRecording("t", asideRes)
	if v, ok := g.inflight.Load(recordingKey("t", "s")); !ok || v.(*recorders).one() != alone {
		t.Fatal("an aside being recorded alone does not mark its session")
	}
	alone.release()
	if _, ok := g.inflight.Load(recordingKey("t", "s")); ok {
		t.Fatal("an aside's recording mark outlives its recording")
	}
}

// TestTwoRecordingsKeepTheMark: two stored exchanges of one session (sent
// by session id) recorded at once: the session is being recorded, and
// waited for, until the last recording ends, whichever ends first. The
// mark was one exchange's, the later overwriting the earlier's, so when
// the later ended first the session was no longer marked while the
// earlier still recorded, and a request went on without waiting for it.
func TestTwoRecordingsKeepTheMark(t *testing.T) {
	for _, laterEndsFirst := range []bool{true, false} {
		g := &Gateway{}
		ctx := context.Background()
		res := resolved{id: "s"}
		first := g.holdCall(ctx, "t", res, &conversation{})
		second := g.holdCall(ctx, "t", res, &conversation{})
		for _, h := range []*hold{first, second} {
			h.claimReply()
			h.markRecording("t", res)
			h.markRecording("t", res) // answering's, then record's: once
			h.recording = true
		}
		ends, last := second, first
		if !laterEndsFirst {
			ends, last = first, second
		}
		ends.release()
		time.AfterFunc(20*time.Millisecond, last.release)
		if g.busy(ctx, "t", "s", "", time.Now().Add(10*time.Second)) {
			t.Fatalf("later ends first %v: a session whose recordings ended is busy", laterEndsFirst)
		}
		select {
		case <-last.pending:
		default:
			t.Fatalf("later ends first %v: a session still being recorded was not waited for once the other recording ended", laterEndsFirst)
		}
		if _, ok := g.inflight.Load(recordingKey("t", "s")); ok {
			t.Fatalf("later ends first %v: the recording mark outlives both recordings", laterEndsFirst)
		}
	}
}
