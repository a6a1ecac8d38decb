package main

import (
	"bufio"
	"fmt"
	"net"
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

// writerBusy is one reading of the two counters, in seconds.
type writerBusy struct{ turn, sync, groups, calls float64 }

// read scrapes the counters.
func (w writerMeter) read() writerBusy {
	resp, err := http.Get(string(w))
	if err != nil {
		fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	var b writerBusy
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		var into *float64
		switch name {
		case "contextd_sqlite_writer_busy_seconds_total":
			into = &b.turn
		case "contextd_sqlite_wal_sync_seconds_total":
			into = &b.sync
		case "contextd_sqlite_write_groups_total":
			into = &b.groups
		case "contextd_sqlite_write_calls_total":
			into = &b.calls
		}
		if ok && into != nil {
			if *into, err = strconv.ParseFloat(value, 64); err != nil {
				fatalf("metrics: %s: %v", name, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		fatalf("metrics: %v", err)
	}
	return b
}

// since says what the turn and the syncs took between before and b, over
// wall and n requests.
func (b writerBusy) since(before writerBusy, wall time.Duration, n int) string {
	turn, sync := b.turn-before.turn, b.sync-before.sync
	groups, calls := b.groups-before.groups, b.calls-before.calls
	return fmt.Sprintf("SQLite's write turn held %.0f %% of the wall time, %.2f ms a request, %.2f ms a group of %.1f calls, %.2f writes a request; WAL syncs %.2f ms a request",
		100*turn/wall.Seconds(), 1000*turn/float64(n), 1000*turn/max(groups, 1), calls/max(groups, 1), calls/float64(n), 1000*sync/float64(n))
}

// freeAddr is a loopback address free a moment ago.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
