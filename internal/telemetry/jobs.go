package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// jobMetrics follow background compaction jobs on this server.
type jobMetrics struct {
	jobs    *prometheus.CounterVec
	running prometheus.Gauge
	saved   prometheus.Counter
}

func newJobMetrics(reg prometheus.Registerer) *jobMetrics {
	j := &jobMetrics{
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "contextd_compaction_jobs_total",
			Help: "Background compaction jobs by outcome: queued (scheduled), refused (queue full), ready (planned), refreshed (queued again to replace an aged result), applied (by a PrepareContext), discarded (the session moved on: compacted, reverted, cleared, changed or deleted), retried (planning failed, tried again later), failed (given up after its attempts)."},
			[]string{"outcome"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "contextd_compaction_jobs_running",
			Help: "Background compaction jobs this server is planning now."}),
		saved: prometheus.NewCounter(prometheus.CounterOpts{Name: "contextd_compaction_job_seconds_saved_total",
			Help: "Planning time (summarizer included) that calls applying a background job's result did not wait."}),
	}
	reg.MustRegister(j.jobs, j.running, j.saved)
	return j
}

// Job counts a background job outcome.
func (m *Metrics) Job(outcome string) {
	if m != nil && m.jobs != nil {
		m.jobs.jobs.WithLabelValues(outcome).Inc()
	}
}

// JobRunning moves the running-jobs gauge by delta.
func (m *Metrics) JobRunning(delta int) {
	if m != nil && m.jobs != nil {
		m.jobs.running.Add(float64(delta))
	}
}

// JobApplied counts a job applied and the planning time it saved.
func (m *Metrics) JobApplied(saved time.Duration) {
	if m != nil && m.jobs != nil {
		m.jobs.jobs.WithLabelValues("applied").Inc()
		m.jobs.saved.Add(saved.Seconds())
	}
}
