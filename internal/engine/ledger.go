package engine

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/summarize"
	"github.com/contextd/contextd/internal/watch"
)

// Ledger sources, as metrics label them.
const (
	sourceCalls    = "calls"
	sourceOverhead = "overhead"
)

// billed prices one call of a model: the ledger row to add, the metrics
// label of the model (the registry's name, "unknown" otherwise: labels stay
// bounded) and the spend in USD.
// modelLabel is a model's name as metrics label it: the registry's name,
// or "unknown" (never the caller's string: cardinality stays bounded).
func (e *Engine) modelLabel(model string) string {
	m, known := e.models.Lookup(model)
	if !known {
		return "unknown"
	}
	return m.Name
}

func (e *Engine) billed(model string, input, cacheRead, cacheWrite, output int64) (store.LedgerTotals, string, float64) {
	m, _ := e.models.Lookup(model)
	label := e.modelLabel(model)
	l := store.LedgerTotals{Calls: 1, Input: input, CacheRead: cacheRead, CacheWrite: cacheWrite, Output: output}
	if m.Pricing == nil {
		l.Unpriced = 1
		return l, label, 0
	}
	usd := m.Pricing.Cost(input, cacheRead, cacheWrite, output)
	// Saturate: a price set absurdly high in the models file must not wrap
	// the ledger's integer (the store saturates the totals the same way).
	nano := math.Round(usd * 1e9)
	if math.IsNaN(nano) || nano > maxCallCostNanoUSD {
		nano = maxCallCostNanoUSD
	}
	l.CostNanoUSD = int64(nano)
	return l, label, usd
}

// maxCallCostNanoUSD bounds what one call can add to a ledger ($1M);
// with each token count bounded at 10^8 by the API, the stores' saturating
// sums (store.LedgerCap) can never overflow.
const maxCallCostNanoUSD = 1e15

// maxReportedTokens bounds each token figure of one reported call (the
// proto's validation says the same; this holds for in-process callers).
const maxReportedTokens = 100_000_000

// checkReported refuses token figures no provider reports for one call,
// and a call with no input at all.
func checkReported(in ReportInput) error {
	for _, f := range []struct {
		name string
		n    int64
	}{{"input_tokens", in.InputTokens}, {"cache_read_input_tokens", in.CacheReadTokens},
		{"cache_creation_input_tokens", in.CacheCreationTokens}, {"output_tokens", in.OutputTokens}} {
		if f.n < 0 || f.n > maxReportedTokens {
			return chat.Invalid(f.name, "must be between 0 and %d for one call", maxReportedTokens)
		}
	}
	if in.InputTokens+in.CacheReadTokens+in.CacheCreationTokens <= 0 && !in.Estimated {
		return chat.Invalid("input_tokens", "the provider's input tokens (with cache reads and writes) must be positive")
	}
	return nil
}

// recordCall adds a reported call to the session's ledger inside the
// report's transaction; the returned func records the metrics once the
// transaction has committed.
func (e *Engine) recordCall(ctx context.Context, tx store.Tx, s store.Session, in ReportInput) (func(), error) {
	l, label, usd := e.billed(s.Model, in.InputTokens, in.CacheReadTokens, in.CacheCreationTokens, in.OutputTokens)
	if err := tx.AddLedger(ctx, s.Tenant, s.ID, store.LedgerCalls, l); err != nil {
		return nil, err
	}
	if in.Estimated {
		// Also in the whole bill (LedgerCalls): this row says how much
		// of it is estimated.
		if err := tx.AddLedger(ctx, s.Tenant, s.ID, store.LedgerEstimated, l); err != nil {
			return nil, err
		}
	}
	return func() {
		e.metrics.Billed(label, sourceCalls, 1, l.Input, l.CacheRead, l.CacheWrite, l.Output, usd)
	}, nil
}

// recordOverhead adds a summarizer's LLM call to the session's ledger as
// compaction overhead. It is recorded whatever becomes of the compaction
// (dry run, stale plan, failure after the call): the provider billed it.
func (e *Engine) recordOverhead(ctx context.Context, tenant, id string, u summarize.Usage) error {
	if u == (summarize.Usage{Model: u.Model}) {
		return nil // no usage block: nothing billed that we know of
	}
	l, label, usd := e.billed(u.Model, u.Input, u.CacheRead, u.CacheWrite, u.Output)
	// The ledger is part of what a session's version names (GetSession and
	// the status carry it), so the version is bumped and watchers told,
	// as ReportUsage does. A PrepareContext planning meanwhile is not
	// stale for it: it compares the session without version and time
	// (unchangedButVersion).
	// Only contextd holds what the summarizer's provider billed: durable
	// even for a gateway request, whose other writes need not be
	// (store.Resendable).
	var final store.Session
	err := e.store.InTx(store.Durable(ctx), func(ctx context.Context, tx store.Tx) error {
		s, err := lockedSession(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		if err := tx.AddLedger(ctx, tenant, id, store.LedgerOverhead, l); err != nil {
			return err
		}
		s.Version++
		s.UpdatedAt = e.timestamp()
		final = s
		return tx.UpdateSession(ctx, &s)
	})
	if err != nil {
		return fmt.Errorf("record summarizer usage: %w", err)
	}
	e.metrics.Billed(label, sourceOverhead, 1, l.Input, l.CacheRead, l.CacheWrite, l.Output, usd)
	e.notify(ctx, tenant, id, final.Version, watch.EventUpdated)
	return nil
}

// unchangedButVersion reports whether b is a (as read before) but for its
// version and time: what changed since is only what bumps a version without
// touching the view, the counts or the policy (a ledger entry).
func unchangedButVersion(a, b store.Session) bool {
	a.Version, b.Version = 0, 0
	a.UpdatedAt, b.UpdatedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// summarizeMetered runs a summarizer and, when it reports usage, records
// it in the session's ledger as compaction overhead; a failure to record is
// returned as a warning, never as the summary's error.
func (e *Engine) summarizeMetered(ctx context.Context, sum summarize.Summarizer, tenant, id string, in compaction.SummaryInput) (string, string, error) {
	m, ok := sum.(summarize.Metered)
	if !ok {
		text, err := sum.Summarize(ctx, in)
		return text, "", err
	}
	text, u, err := m.SummarizeMetered(ctx, in)
	warning := ""
	if rerr := e.recordOverhead(ctx, tenant, id, u); rerr != nil {
		warning = rerr.Error()
	}
	return text, warning, err
}

// Ledger returns what a session has cost so far.
func (e *Engine) Ledger(ctx context.Context, tenant, id string) (store.Ledger, error) {
	return e.store.GetLedger(ctx, tenant, id)
}

// LedgerFigures are the derived figures of a ledger.
type LedgerFigures struct {
	// HitRate is cache reads over all input of the agent's calls.
	HitRate float64
	// CallsUSD, OverheadUSD and TotalUSD are the estimated spend.
	CallsUSD, OverheadUSD, TotalUSD float64
}

// Figures derives hit rate and spend from a ledger.
func Figures(l store.Ledger) LedgerFigures {
	var f LedgerFigures
	if in := l.Calls.Input + l.Calls.CacheRead + l.Calls.CacheWrite; in > 0 {
		f.HitRate = float64(l.Calls.CacheRead) / float64(in)
	}
	f.CallsUSD = float64(l.Calls.CostNanoUSD) / 1e9
	f.OverheadUSD = float64(l.Overhead.CostNanoUSD) / 1e9
	f.TotalUSD = f.CallsUSD + f.OverheadUSD
	return f
}
