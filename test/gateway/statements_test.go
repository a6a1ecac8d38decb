package gateway_test

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// maxStatements is what a gateway request of a growing Chat Completions
// conversation may cost in SQLite statements, its recording included
// (contextd_sqlite_statements_total: every statement of its write
// transactions, BEGIN and COMMIT included, and its reads): 29 on the parent
// of this test, 27 once AppendView read the view generation in its insert,
// 25 once the history head moved by a trigger (migration 00015), 23 once
// resendable transactions ran on a pool opened at synchronous=NORMAL
// instead of setting it before and after each, 21 once the tenant's log
// quota was read by the session row's UPDATE (RETURNING) instead of a
// statement of its own, 19 once a session without open tool calls (their
// count on the session row, migration 00016) skipped their read — see
// docs/performance.md ("SQLite statements per gateway request").
const maxStatements = 19

// TestGatewayStatementsOnSQLite counts, by the embedded store's own
// counter (served on the metrics listener), the SQLite statements of the
// gateway's requests of one conversation that grows by an exchange per
// call, once the session exists: identify, PrepareContext, the recording
// of the reply. The background compaction workers, which poll the
// database while idle, are off, so the count is the requests' own.
func TestGatewayStatementsOnSQLite(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := l.Addr().String()
	l.Close()
	s := start(t, map[string]string{"CONTEXTD_METRICS_ADDR": metrics, "CONTEXTD_BACKGROUND_COMPACTION": "false"})
	count := func() int64 {
		t.Helper()
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "contextd_sqlite_statements_total "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return int64(f)
			}
		}
		t.Fatalf("no contextd_sqlite_statements_total on /metrics (%v)", sc.Err())
		return 0
	}
	call := s.growingChat()
	settled := func() int64 { return settledCount(count) }
	const warm, measured = 5, 20
	for i := range warm {
		call(i)
	}
	c0 := settled()
	for i := range measured {
		call(warm + i)
	}
	perRequest := float64(settled()-c0) / measured
	t.Logf("%.2f SQLite statements per gateway request (%d requests)", perRequest, measured)
	if perRequest > maxStatements {
		t.Errorf("%.2f SQLite statements per gateway request, want at most %d", perRequest, maxStatements)
	}
}
