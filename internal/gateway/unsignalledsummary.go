package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"regexp"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// A compacted history without a signal that keeps no call: Qwen Code
// compressing before a new prompt (its --resume turn), with no call in
// flight, sends its summary, the acknowledgement and the prompt. Nothing
// in it is the session's but the summary, which the provider wrote for it
// in answer to the client's summary request, an aside of that session
// (aside, summaryrequest.go). The store records, for each session, the digest of
// the latest such answer (without its <analysis> block, trimmed:
// summaryBody; answers under minSummary bytes are not recorded, too little
// to tell conversations apart), before the answer's last byte goes out
// (rememberSummary), so the client's next request finds it on any replica
// and after a restart (store.SummaryFinder, migrations 00017 and 00019). A request
// without a signal that extends no session and keeps no call, whose first
// user message starts with the whole of one recorded answer of exactly
// one live session (an answer two sessions recorded is no one's, a
// deleted session's too until it is purged: its client may go on), is that
// session's client compaction, checked as unsignalledCompacts checks one
// that kept calls.
//
// Where the summary ends in the message is not read from the client's
// words: the message's text (trimmed) starts with it and it ends at the
// message's end or at one of its last blank lines (summaryDigests: Qwen
// Code writes the answer, a blank line and its resume trailer), so the
// request carries at most maxSummaryCuts+1 candidate digests.
//
// Work: to record, one digest of the answer and one upsert of the
// session's row; to look up, only for a request without a signal that
// extends no session and keeps no call, one pass over its first message's
// text (one SHA-256 of it, a sum at each candidate end) and one indexed
// read of at most 2 rows per candidate (16 in all).

const (
	// minSummary: answers shorter than this are not recorded.
	minSummary = 64
	// maxSummaryCuts bounds the blank lines, from the message's end,
	// where a summary may end (besides the message's end).
	maxSummaryCuts = 7
)

// analysisBlock is what a client drops from the answer it keeps: an
// <analysis> block, or an unterminated one to the end (as Qwen Code's
// stripAnalysisBlock).
var analysisBlock = regexp.MustCompile(`(?s)<analysis>.*?</analysis>\s*|<analysis>.*$`)

// summaryBody is the text of reply without <analysis> blocks, trimmed (the
// part a client keeps as its summary).
func summaryBody(reply []chat.Message) string {
	var b strings.Builder
	for i := range reply {
		b.WriteString(reply[i].Text())
	}
	return strings.TrimSpace(analysisBlock.ReplaceAllString(b.String(), ""))
}

// summaryDigest is the digest of a summary as the store records it.
func summaryDigest(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// summaryRecordWait bounds how long the answer's last byte waits for its
// summary's record (rememberSummary): one upsert of one row, milliseconds
// on a store that answers. A store that does not (SQLite waiting out its
// 30 s busy_timeout, a PostgreSQL that went silent) held the answer for
// as long; past the bound the answer ends and the write goes on behind it
// (detach's 30 s), so the client's next request, seconds later, mostly
// still finds it.
const summaryRecordWait = 2 * time.Second

// rememberSummary records reply, the answer of an aside of session id
// without a signal, as the session's latest summary, unless the session
// recorded a newer one: sum (its digest left empty) orders the answer
// among the session's (the session's version when the aside was resolved,
// the request's arrival: store.SummaryRecord), so an older answer whose
// record lands after a newer one's leaves it (asides do not hold their
// session: two can be answered at once). It runs before the
// answer's last byte goes out, so the client's next request finds it
// wherever it lands, but waits for the write at most summaryRecordWait.
// A write that failed or outlasted the wait is logged and counted
// (telemetry SummaryRecord), never answered: the answer is the
// provider's, and a request that then finds no session by the summary is
// a new conversation, as before.
func (g *Gateway) rememberSummary(ctx context.Context, tenant, id string, sum store.SummaryRecord, reply []chat.Message) {
	body := summaryBody(reply)
	if len(body) < minSummary {
		return
	}
	h := sha256.New()
	h.Write([]byte(body))
	sum.Digest = summaryDigest(h)
	if !g.startRecord() { // the gateway is closing: its store too
		return
	}
	done := make(chan struct{})
	go func() {
		defer g.records.Done()
		defer close(done)
		// A panic here would end the process, not one request, as it did
		// when the write ran in the request's goroutine: it is a failed
		// record (as g.record's, record.go).
		defer func() {
			if p := recover(); p != nil {
				g.cfg.Metrics.SummaryRecord("failed")
				g.log.ErrorContext(ctx, "gateway: the summary's record panicked", "session", id, "panic", fmt.Sprint(p))
			}
		}()
		wctx, cancel := detach(ctx)
		defer cancel()
		// Durable: no client sends it again (store.Resendable).
		if err := g.cfg.Engine.RecordSummary(store.Durable(wctx), tenant, id, sum); err != nil {
			g.cfg.Metrics.SummaryRecord("failed")
			g.log.WarnContext(ctx, "gateway: the summary of an aside was not recorded", "session", id, "err", err)
		}
	}()
	t := time.NewTimer(summaryRecordWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		g.cfg.Metrics.SummaryRecord("late")
		g.log.WarnContext(ctx, "gateway: the summary of an aside was not recorded before its answer ended; still writing",
			"session", id, "wait", summaryRecordWait)
	}
}

// summaryDigests is the digests of the spans of text a summary may be: the
// text trimmed, from its start to its end or to one of its last
// maxSummaryCuts blank lines (each span trimmed, at least minSummary
// bytes), in one pass.
func summaryDigests(text string) []string {
	text = strings.TrimSpace(text)
	ends := []int{len(text)}
	for end := len(text); len(ends) <= maxSummaryCuts; {
		i := strings.LastIndex(text[:end], "\n\n")
		if i < 0 {
			break
		}
		end = len(strings.TrimRight(text[:i], " \t\r\n"))
		ends = append(ends, end)
	}
	h := sha256.New()
	var out []string
	at := 0
	for i := len(ends) - 1; i >= 0; i-- {
		if ends[i] < minSummary || ends[i] == at && len(out) > 0 {
			continue
		}
		h.Write([]byte(text[at:ends[i]]))
		at = ends[i]
		out = append(out, summaryDigest(h))
	}
	return out
}

// summarizedIn resolves a request without a signal that keeps no call as
// the client compaction of the session whose aside answered the summary
// its first user message starts with (ok).
func (g *Gateway) summarizedIn(ctx context.Context, tenant string, c *conversation, sig signal, noRepeat bool, until time.Time) (resolved, bool, error) {
	digests := summaryDigests(c.msgs[0].Text())
	if len(digests) == 0 {
		return resolved{}, false, nil
	}
	hits, err := g.cfg.Engine.FindSummaries(ctx, tenant, digests)
	if err != nil {
		return resolved{}, false, err
	}
	id, live := "", false
	for _, h := range hits {
		if id != "" && h.SessionID != id {
			return resolved{}, false, nil // not one session's summary
		}
		id, live = h.SessionID, h.Live
	}
	if !live || g.busy(ctx, tenant, id, "", until) {
		return resolved{}, false, nil
	}
	m, err := g.match(ctx, tenant, id, c, noRepeat)
	if err != nil || m == nil || !unsignalledCompacts(m, c, 1, false) {
		return resolved{}, false, hideSession(err, resolved{id: id, named: sig.owns(id)})
	}
	res, ok, err := g.compactIn(ctx, tenant, id, c, sig, m)
	return res, ok, hideSession(err, resolved{id: id, named: sig.owns(id)})
}
