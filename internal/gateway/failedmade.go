package gateway

import (
	"context"
	"net/http"

	"github.com/contextd/contextd/internal/engine"
)

// A request that made its session (its history new, or a fork of
// another's) and whose upstream call failed — the provider's error status
// passed on, the provider not reached, an answer that could not be read,
// a stream cut before any usage, the client gone before an answer — leaves
// no session behind: the session holds only what the request sent, which
// its client sends again with its retry. Were it left, it would hold the
// conversation's opening with no reply, and the next conversation with the
// same opening would land in it (sessions with the same history are
// interchangeable) and take it over, while the failed conversation's
// retry went on elsewhere: one conversation in a session whose id it never
// got, the other in two (issue 29, TestOpeningAfterAFailedFirstCall). A
// retry storm of a failing first call leaves none either.

// undoFailedMake deletes the session the exchange made when nothing of its
// call is to be recorded, also when contextd refused the request after
// PrepareContext (its body could not be built: no call, no hold). It runs
// before the hold is released (close): released first, the session would
// be free for a request of this replica to join it (and claim it). The
// delete compares the session's incarnation and the version
// PrepareContext left it at (Engine.DeleteSessionAt, one statement): a
// request on another replica that wrote to it meanwhile keeps it. It is
// kept as well while another exchange of this replica holds it or records
// into it (it joined the session, its history the same), and when
// PrepareContext compacted it: the compaction, and the summarizer's cost
// in its ledger, are work the retry starts from. The statement itself
// keeps a session with any ledger row, compaction or compaction job, so
// neither a compaction by an earlier piece of a long request's replay
// (replayLong: the last piece's Compacted is false) nor a background job
// still running its summarizer loses its work or its bill.
func (x *exchange) undoFailedMake() {
	g, res := x.g, x.res
	if x.recording || x.answered || !x.undoable() {
		return
	}
	if v, ok := g.inflight.Load(sessionKey(x.tenant, res.id)); ok && v != x.hold { // with no hold of its own, any entry is another's
		return
	}
	if _, ok := g.inflight.Load(recordingKey(x.tenant, res.id)); ok {
		return
	}
	ctx, cancel := detach(x.r.Context())
	defer cancel()
	if _, err := g.cfg.Engine.DeleteSessionAt(ctx, x.tenant, res.id, x.prep.Status.Created, x.prep.Status.Version); err != nil {
		g.log.WarnContext(ctx, "gateway: the session of a failed first call not deleted", "session", res.id, "error", err.Error())
	}
}

// undoable: the exchange made its session without a session signal and
// PrepareContext did not compact it (undoFailedMake). A session made
// under a signal (X-Contextd-Session, or an id its client's session id
// derives) is kept: its identity is the signal, so no stranger with the
// same opening lands in it — the takeover the undo prevents happens only
// to a session found by its history, whose id is random and never made
// again — while a request that joined it without a claim (an aside, a
// repeat: they store nothing) would see it deleted under its call, its
// usage lost, and a racing request could append into the same id made
// again (TestSignalledFailedFirstCallKeepsItsSession).
func (x *exchange) undoable() bool {
	return x.res.made && x.sig.id == "" && x.prep.Status.Version != 0 && !x.prep.Status.Compacted
}

// unnameFailedMake takes X-Contextd-Session off the answer of a call
// that failed with nothing to record (the provider's error status, the
// provider not reached, the expand loop's refusal) in a session the
// exchange made: the session is deleted with the failure
// (undoFailedMake), and an answer never names a session that is not
// there. The client's retry makes the conversation's session and is named
// it. A JSON answer that could not be read is unnamed where relay finds it
// (relayResponse). A failure found after the headers went out (a stream
// cut before any event) is named and undone all the same; the id,
// sent back as the client's signal, makes the session again.
func (x *exchange) unnameFailedMake(a answer) {
	if !x.undoable() || len(a.usages) > 0 {
		return
	}
	if a.err != nil || a.resp != nil && a.resp.StatusCode != http.StatusOK || a.held != nil && a.held.status != http.StatusOK {
		x.w.Header().Del(HeaderSession)
	}
}

// claimJoined marks the session a request joined unchanged (its history
// the log: a retry, or the same first request on another replica while
// the session's maker was upstream) one version on
// (Engine.ClaimSession), when the session is still at the version the
// request matched it at (PrepareContext wrote nothing: no edit, no
// compaction). The maker's undo deletes only at the version its own write
// left (undoFailedMake), so the session is never deleted from under a
// joined request, whose call would be answered and billed with no session to
// record it in: its usage lost from the ledger
// (TestFailedFirstCallJoinedOnAnotherReplica). On this replica the
// in-flight map keeps the maker's undo from a joined request only once
// that request holds the session (forward); the claim covers the requests
// between their match and their hold, and the other replicas'. Claimed
// after the undo, the session is gone (ErrNotFound): the request is
// matched again and goes on in a session of its own. It costs one
// transaction per unchanged request (a retry); a request that appended,
// edited or compacted moved the version itself, and so did any other
// write since the match.
func (g *Gateway) claimJoined(ctx context.Context, tenant string, res resolved, prep engine.PrepareResult) error {
	if res.made || res.notStored() || res.history != historyUnchanged || prep.Status.Version != res.version {
		return nil
	}
	return g.cfg.Engine.ClaimSession(ctx, tenant, res.id, prep.Status.Created)
}
