package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWriterMeterReadsContextd: the writer's line reads an in-process
// contextd's /metrics: after a few gateway requests (two writes each, one
// of them durable) its turn, its syncs and its calls have grown. Fails
// when the metrics' names here and in internal/app drift apart (every
// reading zero).
func TestWriterMeterReadsContextd(t *testing.T) {
	up := startUpstream()
	base, writer, stop := startContextd(map[string]string{}, up)
	defer stop()
	before := writer.read()
	l := newLocal(&http.Client{}, 3, cell{convs: 1, messages: 4, contentBytes: 10}, base+"/v1/chat/completions", "meter")
	l.timed()
	after := writer.read()
	if after.turn <= before.turn || after.sync <= before.sync || after.calls-before.calls < 3 || after.groups <= before.groups {
		t.Fatalf("after three gateway requests: %+v, before %+v; want the turn, the syncs, the groups and at least three calls grown", after, before)
	}
}

// TestWriterLine: the line's figures from two readings: the turn's share
// of the wall, its time a request and a group, the calls a group, the
// writes a request and the syncs' time a request.
func TestWriterLine(t *testing.T) {
	before := writerBusy{turn: 1, sync: 0.1, groups: 10, calls: 20}
	after := writerBusy{turn: 1.5, sync: 0.3, groups: 20, calls: 60}
	got := after.since(before, time.Second, 20)
	want := "SQLite's write turn held 50 % of the wall time, 25.00 ms a request, 50.00 ms a group of 4.0 calls, 2.00 writes a request; WAL syncs 10.00 ms a request"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestWriterScrapeRefusesWhatItCannotRead: a metrics page answered with
// an error status, or without one of the four counters, is an error, not
// a reading of zeros (which printed a line saying the turn was held 0 % of
// the time). Fails without scrape's checks of the status and of each name.
func TestWriterScrapeRefusesWhatItCannotRead(t *testing.T) {
	all := "contextd_sqlite_writer_busy_seconds_total 2.5\ncontextd_sqlite_wal_sync_seconds_total 0.5\n" +
		"contextd_sqlite_write_groups_total 7\ncontextd_sqlite_write_calls_total 9\n"
	for _, c := range []struct {
		name, page string
		status     int
		ok         bool
	}{
		{"all four", "# HELP x y\n" + all, http.StatusOK, true},
		{"forbidden", all, http.StatusForbidden, false},
		{"one missing", strings.Replace(all, "contextd_sqlite_write_calls_total 9\n", "", 1), http.StatusOK, false},
		{"not a number", strings.Replace(all, " 9\n", " nine\n", 1), http.StatusOK, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			fmt.Fprint(w, c.page)
		}))
		b, err := writerMeter(srv.URL + "/metrics").scrape()
		srv.Close()
		if c.ok && (err != nil || b != (writerBusy{turn: 2.5, sync: 0.5, groups: 7, calls: 9})) {
			t.Errorf("%s: %+v, %v", c.name, b, err)
		}
		if !c.ok && err == nil {
			t.Errorf("%s: read %+v, want an error", c.name, b)
		}
	}
}

// TestWriterScrapeNotMeasured: the writer's counters are scraped from the
// in-process contextd, so a scrape is this process's CPU and allocations;
// neither may fall in the window a cell's CPU and bytes a request are
// measured over. The window's two ends read the other processes' CPU
// (meter.others), which here turns a flag on and then off; the fake
// /metrics notes each scrape, and whether the flag was on. Both scrapes
// (before and after the cell) happen, neither while it is measured.
// Fails with a scrape inside the window.
func TestWriterScrapeNotMeasured(t *testing.T) {
	all := "contextd_sqlite_writer_busy_seconds_total 0\ncontextd_sqlite_wal_sync_seconds_total 0\n" +
		"contextd_sqlite_write_groups_total 0\ncontextd_sqlite_write_calls_total 0\n"
	var measuring atomic.Bool
	var scrapes, during atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scrapes.Add(1)
		if measuring.Load() {
			during.Add(1)
		}
		fmt.Fprint(w, all)
	}))
	defer srv.Close()
	lat := slices.Repeat([]time.Duration{time.Millisecond}, 10)
	m := meter{start: func(cell, string, string) load { return slowExit{latencies: lat} },
		others: func() time.Duration { measuring.Store(!measuring.Load()); return 0 }, writer: writerMeter(srv.URL + "/metrics")}
	m.run(cell{convs: 1, messages: 2}, "", "t", true)
	if scrapes.Load() != 2 || during.Load() != 0 {
		t.Errorf("%d scrapes, %d of them while the cell was measured; want 2, none", scrapes.Load(), during.Load())
	}
}

// TestBenchContextdSamplesNoBlocking: the in-process contextd's metrics
// listener, which the writer's line reads, does not serve /debug/pprof,
// whose default (CONTEXTD_PPROF=loopback) turned on the block and mutex
// profiles' sampling for the whole bench process, every cell's direct and
// gateway calls, when no -blockprofile or -mutexprofile asked for it.
// Fails without the bench's CONTEXTD_PPROF=off (/debug/pprof/ answered
// 200, the mutex sampling 1 in 100).
func TestBenchContextdSamplesNoBlocking(t *testing.T) {
	runtime.SetMutexProfileFraction(0) // what another test's contextd set
	runtime.SetBlockProfileRate(0)
	up := startUpstream()
	_, writer, stop := startContextd(map[string]string{}, up)
	defer stop()
	// Answered, the metrics listener is set up, and with it pprof's mux.
	resp, err := http.Get(strings.TrimSuffix(string(writer), "/metrics") + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/debug/pprof/ on the bench's metrics listener: %s, want 404", resp.Status)
	}
	if rate := runtime.SetMutexProfileFraction(-1); rate != 0 {
		t.Errorf("mutex profile sampling 1 in %d, want off", rate)
	}
}
