package telemetry

import "github.com/prometheus/client_golang/prometheus"

// gatewayMetrics follow the gateway's own writes.
type gatewayMetrics struct {
	summaryRecords *prometheus.CounterVec
}

func newGatewayMetrics(reg prometheus.Registerer) *gatewayMetrics {
	g := &gatewayMetrics{
		summaryRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextd_gateway_summary_records_total",
			Help: "Records of an aside's summary (the gateway's unsignalled compaction) that did not land in time, by outcome: late (not written when the answer's last byte went out; written after, or failed), failed (the store's write failed). The client's next request may then find no session by its summary."},
			[]string{"outcome"}),
	}
	reg.MustRegister(g.summaryRecords)
	return g
}

// SummaryRecord counts a summary record that was late or failed.
func (m *Metrics) SummaryRecord(outcome string) {
	if m != nil && m.gateway != nil {
		m.gateway.summaryRecords.WithLabelValues(outcome).Inc()
	}
}
