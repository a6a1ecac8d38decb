package main

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// writerMeter is the metrics URL of an in-process contextd on SQLite: its
// store's write turn, through which every write goes, and the WAL's syncs
// after durable commits (contextd_sqlite_writer_busy_seconds_total,
// contextd_sqlite_wal_sync_seconds_total). A cell's line says what share
// of its wall time the turn was held: near 1, the one writer is what
// limits the cell.
type writerMeter string

// writerBusy is one reading of the four counters: the turn's and the
// syncs' seconds, the groups and their calls.
type writerBusy struct{ turn, sync, groups, calls float64 }

// read scrapes the counters; the run fails when it cannot.
func (w writerMeter) read() writerBusy {
	b, err := w.scrape()
	if err != nil {
		fatalf("metrics: %v", err)
	}
	return b
}

// scrapeClient bounds a scrape: contextd is in this process, on loopback.
var scrapeClient = &http.Client{Timeout: 10 * time.Second}

// scrape reads the counters from the metrics page. A page that is not
// answered 200, or that lacks one of them (renamed in internal/app, or the
// store not SQLite), is an error, not a line of zeros.
func (w writerMeter) scrape() (writerBusy, error) {
	var b writerBusy
	resp, err := scrapeClient.Get(string(w))
	if err != nil {
		return b, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("%s: %s", w, resp.Status)
	}
	want := map[string]*float64{
		"contextd_sqlite_writer_busy_seconds_total": &b.turn,
		"contextd_sqlite_wal_sync_seconds_total":    &b.sync,
		"contextd_sqlite_write_groups_total":        &b.groups,
		"contextd_sqlite_write_calls_total":         &b.calls,
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		into := want[name]
		if !ok || into == nil {
			continue
		}
		if *into, err = strconv.ParseFloat(value, 64); err != nil {
			return b, fmt.Errorf("%s: %w", name, err)
		}
		delete(want, name)
	}
	if err := sc.Err(); err != nil {
		return b, err
	}
	for name := range want {
		return b, fmt.Errorf("%s: no %s", w, name)
	}
	return b, nil
}

// since says what the turn and the syncs took between before and b, over
// wall and n requests.
func (b writerBusy) since(before writerBusy, wall time.Duration, n int) string {
	turn, sync := b.turn-before.turn, b.sync-before.sync
	groups, calls := b.groups-before.groups, b.calls-before.calls
	return fmt.Sprintf("SQLite's write turn held %.0f %% of the wall time, %.2f ms a request, %.2f ms a group of %.1f calls, %.2f writes a request; WAL syncs %.2f ms a request",
		100*turn/wall.Seconds(), 1000*turn/float64(n), 1000*turn/max(groups, 1), calls/max(groups, 1), calls/float64(n), 1000*sync/float64(n))
}
