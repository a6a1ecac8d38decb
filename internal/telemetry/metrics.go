// Package telemetry owns contextd's domain metrics (Prometheus) and its
// OpenTelemetry tracing, switched on by the standard OTEL_* variables.
package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the domain metrics; gRPC metrics come from go-grpc-middleware.
// A nil *Metrics records nothing.
type Metrics struct {
	tokensCounted      *prometheus.CounterVec
	messagesRecounted  *prometheus.CounterVec
	compactions        *prometheus.CounterVec
	tokensSaved        prometheus.Counter
	summarizerSeconds  *prometheus.HistogramVec
	summarizerFailures *prometheus.CounterVec
	ledger             *ledgerMetrics
	jobs               *jobMetrics
	gateway            *gatewayMetrics
}

// NewMetrics registers the domain metrics on reg; subscribers reports the
// number of open watch streams.
func NewMetrics(reg prometheus.Registerer, subscribers func() float64) *Metrics {
	m := &Metrics{
		tokensCounted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextd_tokens_counted_total",
			Help: "Tokens counted (CountTokens and appended messages), by encoding."}, []string{"encoding"}),
		messagesRecounted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextd_messages_recounted_total",
			Help: "Stored messages counted again because their count was made for another encoding or framing (revert, expand), by encoding."}, []string{"encoding"}),
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextd_compactions_total",
			Help: "Compactions applied, by tier (one compaction can apply several tiers)."}, []string{"tier"}),
		tokensSaved: prometheus.NewCounter(prometheus.CounterOpts{Name: "contextd_compaction_tokens_saved_total",
			Help: "Tokens removed from active views by compaction."}),
		summarizerSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "contextd_summarizer_duration_seconds",
			Help: "Time to write one summary, by summarizer.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"summarizer"}),
		summarizerFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextd_summarizer_failures_total",
			Help: "Summaries an LLM failed to write (the extractive fallback was used), by summarizer."}, []string{"summarizer"}),
	}
	reg.MustRegister(m.tokensCounted, m.messagesRecounted, m.compactions, m.tokensSaved, m.summarizerSeconds, m.summarizerFailures,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "contextd_watch_subscribers",
			Help: "Open WatchContextStatus streams on this server."}, subscribers))
	m.ledger = newLedgerMetrics(reg)
	m.jobs = newJobMetrics(reg)
	m.gateway = newGatewayMetrics(reg)
	return m
}

// TokensCounted records n tokens counted with an encoding.
func (m *Metrics) TokensCounted(encoding string, n int64) {
	if m != nil && n > 0 {
		m.tokensCounted.WithLabelValues(encoding).Add(float64(n))
	}
}

// MessagesRecounted records n stored messages counted again with an
// encoding because their stored count was stale.
func (m *Metrics) MessagesRecounted(encoding string, n int) {
	if m != nil && n > 0 {
		m.messagesRecounted.WithLabelValues(encoding).Add(float64(n))
	}
}

// Compacted records a compaction.
func (m *Metrics) Compacted(tiers []string, saved int64) {
	if m == nil {
		return
	}
	for _, t := range tiers {
		m.compactions.WithLabelValues(t).Inc()
	}
	if saved > 0 {
		m.tokensSaved.Add(float64(saved))
	}
}

// Summarized records one summarization attempt.
func (m *Metrics) Summarized(summarizer string, took time.Duration, failed bool) {
	if m == nil {
		return
	}
	m.summarizerSeconds.WithLabelValues(summarizer).Observe(took.Seconds())
	if failed {
		m.summarizerFailures.WithLabelValues(summarizer).Inc()
	}
}
