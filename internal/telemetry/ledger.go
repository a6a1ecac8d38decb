package telemetry

import "github.com/prometheus/client_golang/prometheus"

// ledgerMetrics count what providers billed, by model (the registry's name,
// or "unknown"; never a session, so cardinality stays bounded) and source
// ("calls" for the agent's reported calls, "overhead" for the summarizer's).
type ledgerMetrics struct {
	calls  *prometheus.CounterVec
	tokens *prometheus.CounterVec
	spend  *prometheus.CounterVec
	// disagreed counts reports of exact-encoding models far from
	// contextd's own count (engine: maxExactDisagreement).
	disagreed *prometheus.CounterVec
}

func newLedgerMetrics(reg prometheus.Registerer) *ledgerMetrics {
	l := &ledgerMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextd_model_calls_total",
			Help: "Model calls recorded in session ledgers, by model and source (calls, overhead)."}, []string{"model", "source"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextd_billed_tokens_total",
			Help: "Tokens providers billed, by model, source (calls, overhead) and kind (input, cache_read, cache_write, output)."},
			[]string{"model", "source", "kind"}),
		spend: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextd_estimated_spend_usd_total",
			Help: "Estimated spend in USD at registry prices, by model and source (calls, overhead)."}, []string{"model", "source"}),
		disagreed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextd_usage_reports_disagreeing_total",
			Help: "Usage reports of exact-encoding models more than 5% off contextd's own count of the request (ledgered, not anchored), by model."}, []string{"model"}),
	}
	reg.MustRegister(l.calls, l.tokens, l.spend, l.disagreed)
	return l
}

// Billed records model calls added to a ledger.
func (m *Metrics) Billed(model, source string, calls, input, cacheRead, cacheWrite, output int64, usd float64) {
	if m == nil || m.ledger == nil {
		return
	}
	l := m.ledger
	l.calls.WithLabelValues(model, source).Add(float64(calls))
	for kind, n := range map[string]int64{"input": input, "cache_read": cacheRead, "cache_write": cacheWrite, "output": output} {
		l.tokens.WithLabelValues(model, source, kind).Add(float64(n))
	}
	l.spend.WithLabelValues(model, source).Add(usd)
}

// ReportDisagreed counts a usage report of an exact-encoding model that
// was far from contextd's own count (ledgered, not anchored).
func (m *Metrics) ReportDisagreed(model string) {
	if m == nil || m.ledger == nil {
		return
	}
	m.ledger.disagreed.WithLabelValues(model).Inc()
}
