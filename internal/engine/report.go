package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/tokens"
	"github.com/contextd/contextd/internal/watch"
)

// ReportInput is the provider's usage for one model call of a session.
type ReportInput struct {
	// Input tokens as the provider bills them: uncached input, cache reads
	// and cache writes are added up.
	InputTokens         int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	OutputTokens        int64
	// Which request it was: the number of active messages sent, or the
	// session version PrepareContext returned (it must still be current).
	MessageCount *int64
	Version      *int64
}

// maxCalibrationFactor bounds a report that calibration learns from: a
// provider's count further than this factor from the local one is not a
// tokenizer difference (approximations are off by tens of percent).
const maxCalibrationFactor = 2.0

// maxCalibrationSamples bounds the moving average: the ratio follows the
// mean of about the last ten reports.
const maxCalibrationSamples = 10

// ReportUsage records the provider's count of a request the runtime sent.
// The session's usage becomes anchored (that exact count plus an estimate of
// what came after), the version is bumped and watchers are told
// (EventUpdated), and for approximate encodings the model's ratio of
// provider to local counts is learned for every later estimate.
func (e *Engine) ReportUsage(ctx context.Context, tenant, id string, in ReportInput) (Usage, error) {
	if err := checkReported(in); err != nil {
		return Usage{}, err
	}
	provider := in.InputTokens + in.CacheReadTokens + in.CacheCreationTokens
	if provider <= 0 {
		return Usage{}, chat.Invalid("input_tokens", "the provider's input tokens (with cache reads and writes) must be positive")
	}
	var final store.Session
	implausible := ""   // why the report did not calibrate
	var recorded func() // metrics of the ledger entry, after the commit
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		s, err := lockedSession(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		n := s.ActiveCount
		switch {
		case in.MessageCount != nil:
			if *in.MessageCount < 0 || *in.MessageCount > s.ActiveCount {
				return chat.Invalid("message_count", "%d is not between 0 and the %d messages of the active view", *in.MessageCount, s.ActiveCount)
			}
			n = *in.MessageCount
		case in.Version != nil && *in.Version != s.Version:
			return fmt.Errorf("session %q moved on from version %d to %d; report with message_count instead: %w",
				id, *in.Version, s.Version, ErrFailedPrecondition)
		}
		view, err := tx.ViewMessages(ctx, tenant, id)
		if err != nil {
			return err
		}
		m, _ := e.models.Lookup(s.Model)
		local := s.SystemTokens + s.ToolsTokens + sumTokens(view[:n]) + int64(tokens.FramingOf(m).ReplyPriming)
		s.AnchorInput, s.AnchorLocal, s.AnchorCount, s.AnchorEpoch = provider, local, n, s.ViewEpoch
		if !m.Exact {
			c, err := tx.GetCalibration(ctx, tenant, m.Name)
			if errors.Is(err, store.ErrNotFound) {
				c, err = store.Calibration{Model: m.Name, Ratio: 1}, nil
			}
			if err != nil {
				return err
			}
			sample := float64(provider) / float64(max(local, 1))
			if sample < 1/maxCalibrationFactor || sample > maxCalibrationFactor {
				// Not a tokenizer difference but a report of another request
				// (or a typo): anchor this session, teach the model nothing.
				implausible = fmt.Sprintf("input tokens %d are %.2f× the local count %d of that request: not used to calibrate %s (a tokenizer differs by far less; check message_count or version)", provider, sample, local, m.Name)
			} else {
				c.Samples++
				c.Ratio += (sample - c.Ratio) / float64(min(c.Samples, maxCalibrationSamples))
				c.UpdatedAt = e.timestamp()
				if err := tx.PutCalibration(ctx, tenant, c); err != nil {
					return err
				}
			}
		}
		if recorded, err = e.recordCall(ctx, tx, s, in); err != nil {
			return err
		}
		// The usage a watcher sees changed: a new version, announced below
		// (the view did not change, so ViewEpoch stays and cached views stay
		// valid).
		s.Version++
		s.UpdatedAt = e.timestamp()
		final = s
		return tx.UpdateSession(ctx, &s)
	})
	if err != nil {
		return Usage{}, err
	}
	recorded()
	e.notify(ctx, tenant, id, final.Version, watch.EventUpdated)
	v, err := e.view(ctx, final)
	if implausible != "" {
		v.Usage.Warnings = append(v.Usage.Warnings, implausible)
	}
	return v.Usage, err
}
