package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/tokens"
	"github.com/contextd/contextd/internal/watch"
)

// ReportInput is the provider's usage for one model call of a session.
type ReportInput struct {
	// The provider's usage in contextd's convention (the proto's
	// ReportUsageRequest): InputTokens is the uncached input only, and
	// InputTokens + CacheReadTokens + CacheCreationTokens is everything the
	// provider counted for the request. Anthropic reports it so; OpenAI's
	// prompt_tokens (input_tokens) includes its cached_tokens, which the
	// caller subtracts.
	InputTokens         int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	OutputTokens        int64
	// Which request it was, one of: the view token PrepareContext returned
	// (it names the view even after the session was compacted since), the
	// number of active messages sent (of the active view now), or the
	// session version PrepareContext returned (it must still be current).
	ViewToken    string
	MessageCount *int64
	Version      *int64
	// ViewPrefix: the request sent only the first ViewPrefix messages of
	// the view ViewToken names (the gateway's repeat or aside, which
	// leaves out the view's last replies). They are the active view's
	// first ViewPrefix while that view continues (appended to only);
	// once it was rewritten (compacted, reverted, cleared) the call goes
	// into the ledger, and nothing is calibrated or anchored: a count of
	// the active view's messages (MessageCount) would name other messages
	// then, or more than it holds, which refused the report and left the
	// billed call out of the ledger (TestAsideBilledAfterARoundCompacted).
	// Not in the API.
	ViewPrefix *int64 `json:",omitempty"`
	// IdempotencyKey makes a retried report safe: a key the session has
	// seen with the same report records nothing again.
	IdempotencyKey string
	// AddedLocalTokens: the request sent the view named above and, after
	// it, messages that are not in the session, counted locally at this
	// many tokens (the gateway's expand loop). They are added to the local
	// count that calibrates, and the session is not anchored (its view is
	// not what was sent). Not in the API.
	AddedLocalTokens int64
	// Compacted: the provider compacted the request itself and reported
	// the input of the compacted one (Anthropic's compaction block: its
	// iteration is left out of the usage), not of what was sent: the call
	// is in the ledger; nothing is calibrated or anchored. Not in the API.
	Compacted bool
	// Own: the request was none of the view but the client's own messages
	// (an aside the gateway sent as its client sent it:
	// gateway/slimmedaside.go), which contextd did not count: the call is
	// in the ledger; nothing is calibrated or anchored. Not in the API
	// (omitted from reportHash's JSON when false, so a report's hash is
	// what it was).
	Own bool `json:",omitempty"`
	// Estimated: the call's answer ended before the provider's final
	// usage (a stream cut upstream or by the client, an error event):
	// the figures above are what the stream carried (Anthropic's
	// message_start input and cache fields), and where it carried no
	// input contextd's own count of the request reported on is taken:
	// the view view_token names (or the active view's first
	// message_count messages, else the whole of it) with
	// AddedLocalTokens. For an
	// Own request, which sent none of the view, that count is still of
	// that view, not of what was sent: the estimate
	// is of the session's size, not of the aside. The output is at least RelayedText counted with the session's
	// encoding. The call is in the ledger, marked estimated
	// (store.LedgerEstimated); nothing is calibrated or anchored. Not in
	// the API.
	Estimated   bool   `json:",omitempty"`
	RelayedText string `json:",omitempty"`
}

// reportKey is where a report's idempotency key is kept: beside the
// append keys of the session, in a namespace of its own.
func reportKey(key string) string { return "report:" + key }

// reportHash is the digest a report's idempotency key is checked against.
func reportHash(in ReportInput) string {
	in.IdempotencyKey = ""
	body, _ := json.Marshal(in) // plain fields: never fails
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// maxCalibrationFactor bounds a report that calibration learns from: a
// provider's count further than this factor from the local one is not a
// tokenizer difference (approximations are off by tens of percent).
const maxCalibrationFactor = 2.0

// preparedLocal is the local count of the view the session's latest
// PrepareContext returned, when token is that view's and the session's
// model, system prompt and tools are still the ones it was counted with;
// -1 otherwise (also when retention purged one of its messages).
func preparedLocal(ctx context.Context, tx store.Tx, s *store.Session, token string, priming int64) (int64, error) {
	prev, err := tx.GetPreparedView(ctx, s.Tenant, s.ID)
	if errors.Is(err, store.ErrNotFound) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	if prev.ViewToken != token || prev.Fixed != fixedDigest(*s) {
		return -1, nil
	}
	msgs, err := tx.MessagesByID(ctx, s.Tenant, s.ID, prev.IDs)
	if errors.Is(err, store.ErrNotFound) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	return s.SystemTokens + s.ToolsTokens + sumTokens(msgs) + priming, nil
}

// maxExactDisagreement is how far (a fraction of contextd's count) a
// provider's count of a request may be from contextd's own count of it
// when the model's encoding is exact. Further off, the report is not of
// the request counted (a misconfigured or fake upstream, a proxy that adds
// or drops content): it goes into the ledger with a warning and a metric,
// and never anchors the session, so a report can never make a view look
// smaller (or larger) than what is sent.
const maxExactDisagreement = 0.05

// maxCalibrationSamples bounds the moving average: the ratio follows the
// mean of about the last ten reports.
const maxCalibrationSamples = 10

// ReportUsage records the provider's count of a request the runtime sent.
// The call goes into the ledger; the version is bumped and watchers are
// told (EventUpdated). When the request is a prefix of the active view, the
// session's usage becomes anchored (that exact count plus an estimate of
// what came after) and, for approximate encodings, the model's ratio of
// provider to local counts is learned for every later estimate. A view_token
// of a view rewritten since (compaction, revert, clear, model change)
// still calibrates when it is the view the latest PrepareContext returned
// (its message ids are kept: prepared_views), and otherwise only goes into
// the ledger, with a warning saying so.
func (e *Engine) ReportUsage(ctx context.Context, tenant, id string, in ReportInput) (Usage, error) {
	if err := checkReported(in); err != nil {
		return Usage{}, err
	}
	var final store.Session
	var out reported
	sent := false // announced with the commit
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		sent = false
		s, err := lockedSession(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		if out, err = e.reportInTx(ctx, tx, &s, in); err != nil {
			return err
		}
		final = s
		if out.replayed {
			return nil
		}
		if err := tx.UpdateSession(ctx, &s); err != nil {
			return err
		}
		sent, err = e.announceTx(ctx, tx, tenant, id, s.Version, watch.EventUpdated)
		return err
	})
	if err != nil {
		return Usage{}, err
	}
	if !out.replayed {
		e.reportedAfterCommit(ctx, tenant, id, out)
		if !sent {
			e.notify(ctx, tenant, id, final.Version, watch.EventUpdated)
		}
	}
	// Committed: a usage that cannot be read is a warning, not an error
	// (the caller would report the call again).
	v, err := e.view(ctx, final)
	if err != nil {
		e.log.WarnContext(ctx, "report: usage", "tenant", tenant, "session", id, "err", err)
		v.Usage.Warnings = append(v.Usage.Warnings, "usage unavailable: "+err.Error())
	}
	if out.skipped != "" {
		v.Usage.Warnings = append(v.Usage.Warnings, out.skipped)
	}
	if out.replayed {
		v.Usage.Warnings = append(v.Usage.Warnings, fmt.Sprintf("idempotency key %q: this report was recorded before; nothing was recorded again", in.IdempotencyKey))
	}
	return v.Usage, nil
}

// reported is what reportInTx did, for after the commit.
type reported struct {
	replayed  bool   // recorded before (the same idempotency key): nothing done
	skipped   string // why the report did not calibrate or anchor
	disagreed string // the model whose exact count the report disagreed with
	recorded  func() // metrics of the ledger entry
}

// reportInTx records report in into session s, locked by the caller's
// transaction, and updates s in memory (a new version; the caller writes
// it unless out.replayed).
func (e *Engine) reportInTx(ctx context.Context, tx store.Tx, s *store.Session, in ReportInput) (reported, error) {
	var out reported
	tenant, id := s.Tenant, s.ID
	provider := in.InputTokens + in.CacheReadTokens + in.CacheCreationTokens
	if in.IdempotencyKey != "" {
		hash := reportHash(in)
		rec, err := tx.GetIdempotency(ctx, tenant, id, reportKey(in.IdempotencyKey))
		switch {
		case err == nil && rec.RequestHash == hash:
			out.replayed = true
			return out, nil // recorded before: answer the usage now
		case err == nil:
			return out, fmt.Errorf("idempotency key %q was used for a different report: %w", in.IdempotencyKey, ErrFailedPrecondition)
		case !errors.Is(err, store.ErrNotFound):
			return out, err
		}
		if err := tx.PutIdempotency(ctx, tenant, id, store.Idempotency{Key: reportKey(in.IdempotencyKey), RequestHash: hash, Response: []byte("{}")}); err != nil {
			return out, err
		}
	}
	n := s.ActiveCount
	m, _ := e.models.Lookup(s.Model)
	priming := int64(tokens.FramingOf(m).ReplyPriming)
	local := int64(-1) // the local count of the request reported on; -1: of the active view's first n
	anchor := false
	switch {
	case in.ViewToken != "":
		t, err := parseViewToken("view_token", in.ViewToken, id)
		if err != nil {
			return out, err
		}
		if t.continues(s) {
			n = t.last // ordinals of one epoch run 1, 2, ...: the first t.last messages
			if in.ViewPrefix != nil {
				n = min(n, max(*in.ViewPrefix, 0))
			}
			break
		}
		if in.ViewPrefix != nil {
			out.skipped = "the view the call sent a prefix of was rewritten since (the session was compacted, reverted, cleared or changed): the call is in the ledger; nothing was calibrated or anchored"
			break
		}
		// The view was rewritten since: calibrate with the view the
		// latest PrepareContext returned, if that is the one; no anchor.
		if local, err = preparedLocal(ctx, tx, s, in.ViewToken, priming); err != nil {
			return out, err
		}
		if local < 0 {
			out.skipped = "the view of view_token is neither the active view nor the one the latest PrepareContext returned (the session was compacted, reverted, cleared or changed since): the call is in the ledger; nothing was calibrated or anchored"
		}
	case in.MessageCount != nil:
		if *in.MessageCount < 0 || *in.MessageCount > s.ActiveCount {
			return out, chat.Invalid("message_count", "%d is not between 0 and the %d messages of the active view", *in.MessageCount, s.ActiveCount)
		}
		n = *in.MessageCount
	case in.Version != nil && *in.Version != s.Version:
		return out, fmt.Errorf("session %q moved on from version %d to %d; report with view_token instead: %w",
			id, *in.Version, s.Version, ErrFailedPrecondition)
	}
	if in.Compacted {
		out.skipped = "the provider compacted the request and reported the compacted one's input: the call is in the ledger; nothing was calibrated or anchored"
	}
	if in.Own {
		out.skipped = "the request was the client's own messages, not the view: the call is in the ledger; nothing was calibrated or anchored"
	}
	if in.Estimated {
		// A stream that ended before the provider's usage and carried no
		// input (OpenAI's usage comes last) is recorded with contextd's
		// own count of the request reported on (local, when the view
		// token named the view the latest PrepareContext returned; else
		// the active view's first n messages), with what it sent after
		// the view. Input the stream did carry (Anthropic's
		// message_start) is the provider's and stays. The output was
		// counted before the transaction (RecordExchange). Nothing below
		// reads the estimate but the ledger: it is skipped.
		if provider == 0 {
			count := local
			if count < 0 {
				var err error
				if count, err = viewLocal(ctx, tx, s, n, priming); err != nil {
					return out, err
				}
			}
			in.InputTokens = max(1, count+max(in.AddedLocalTokens, 0))
		}
		out.skipped = "the answer ended before the provider's usage: the call is in the ledger as an estimate; nothing was calibrated or anchored"
	}
	if out.skipped == "" && local < 0 {
		var err error
		if local, err = viewLocal(ctx, tx, s, n, priming); err != nil {
			return out, err
		}
		anchor = in.AddedLocalTokens == 0
	}
	if local >= 0 {
		local += max(in.AddedLocalTokens, 0)
	}
	if m.Exact && out.skipped == "" && local > 0 {
		if off := math.Abs(float64(provider-local)) / float64(local); off > maxExactDisagreement {
			// contextd's count of an exact encoding is the count: a
			// report far from it is of something else.
			anchor, out.disagreed = false, e.modelLabel(s.Model)
			out.skipped = fmt.Sprintf("input tokens %d (uncached %d + cache reads %d + cache writes %d) are %.0f%% off contextd's exact count %d of that request (%s): the call is in the ledger; the usage is not anchored to it (is the upstream the model's provider?)",
				provider, in.InputTokens, in.CacheReadTokens, in.CacheCreationTokens, 100*off, local, m.Encoding)
		}
	}
	// For an approximate encoding the provider's count is the better
	// one, but a report below half of contextd's count is not of the
	// request (a fake or misconfigured upstream): anchored, it would
	// make the view look smaller than it is and stop compaction.
	under := !m.Exact && local > 0 && float64(provider) < float64(local)/maxCalibrationFactor
	if anchor && !under {
		s.AnchorInput, s.AnchorLocal, s.AnchorCount, s.AnchorEpoch = provider, local, n, s.ViewEpoch
	}
	if !m.Exact && out.skipped == "" {
		c, err := tx.GetCalibration(ctx, tenant, m.Name)
		if errors.Is(err, store.ErrNotFound) {
			c, err = store.Calibration{Model: m.Name, Ratio: 1}, nil
		}
		if err != nil {
			return out, err
		}
		sample := float64(provider) / float64(max(local, 1))
		if sample < 1/maxCalibrationFactor || sample > maxCalibrationFactor {
			// Not a tokenizer difference but a report of another request
			// (or a typo): anchor this session, teach the model nothing.
			out.skipped = fmt.Sprintf("input tokens %d are %.2f× the local count %d of that request: not used to calibrate %s (a tokenizer differs by far less; check view_token or message_count)", provider, sample, local, m.Name)
			if under {
				out.skipped += "; nor anchored, which would make the view look smaller than it is"
			}
		} else {
			c.Samples++
			c.Ratio += (sample - c.Ratio) / float64(min(c.Samples, maxCalibrationSamples))
			c.UpdatedAt = e.timestamp()
			if err := tx.PutCalibration(ctx, tenant, c); err != nil {
				return out, err
			}
		}
	}
	recorded, err := e.recordCall(ctx, tx, *s, in)
	if err != nil {
		return out, err
	}
	out.recorded = recorded
	// The usage a watcher sees changed: a new version (the view did not
	// change, so ViewEpoch stays and cached views stay valid).
	s.Version++
	s.UpdatedAt = e.timestamp()
	return out, nil
}

// viewLocal is contextd's own count of a request that sent the active
// view's first n messages. The whole active view sums to ActiveTokens:
// only a prefix needs its messages read.
func viewLocal(ctx context.Context, tx store.Tx, s *store.Session, n, priming int64) (int64, error) {
	prefix := s.ActiveTokens
	if n != s.ActiveCount {
		view, err := tx.ViewMessages(ctx, s.Tenant, s.ID)
		if err != nil {
			return 0, err
		}
		prefix = sumTokens(view[:min(max(n, 0), int64(len(view)))])
	}
	return s.SystemTokens + s.ToolsTokens + prefix + priming, nil
}

// reportedAfterCommit records the metrics of a committed report.
func (e *Engine) reportedAfterCommit(ctx context.Context, tenant, id string, out reported) {
	out.recorded()
	if out.disagreed != "" {
		e.metrics.ReportDisagreed(out.disagreed)
		e.log.WarnContext(ctx, "report: provider count disagrees with the exact count", "tenant", tenant, "session", id, "model", out.disagreed)
	}
}
