package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SQLiteCounts is what the embedded SQLite store counts of its own work
// (internal/store/sqlite: statements.go, writerbusy.go, groupcommit.go).
type SQLiteCounts interface {
	Statements() int64
	WriterBusy() (turn, sync time.Duration)
	GroupStats() (transactions, calls int64)
}

// RegisterSQLite registers the embedded SQLite store's counters on reg,
// read from s when scraped.
func RegisterSQLite(reg prometheus.Registerer, s SQLiteCounts) {
	counter := func(name, help string, read func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, read))
	}
	counter("contextd_sqlite_statements_total",
		"Statements run by the embedded SQLite store: those of its group-committed write transactions (BEGIN and COMMIT included) and of its hot reads; forks, retention and the view sweeps' reads are not counted.",
		func() float64 { return float64(s.Statements()) })
	counter("contextd_sqlite_writer_busy_seconds_total",
		"Wall time the embedded SQLite store's group-committed write transactions held its one write turn (begin to commit, and the WAL's sync after a durable one), and its retention's deletes, which hold the same turn: its rate is the writer's busy share, near 1 the replica's writes are its limit.",
		func() float64 { t, _ := s.WriterBusy(); return t.Seconds() })
	counter("contextd_sqlite_wal_sync_seconds_total",
		"Wall time of the embedded SQLite store's fsyncs of its WAL after durable commits (inside the write turn).",
		func() float64 { _, t := s.WriterBusy(); return t.Seconds() })
	counter("contextd_sqlite_write_groups_total",
		"Write transactions of the embedded SQLite store's group commit (each holds the calls queued when it began).",
		func() float64 { g, _ := s.GroupStats(); return float64(g) })
	counter("contextd_sqlite_write_calls_total",
		"Calls committed by the embedded SQLite store's group-committed write transactions.",
		func() float64 { _, c := s.GroupStats(); return float64(c) })
}
