package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// TestSummaryRecordDoesNotHoldTheAnswer: the record of an aside's summary
// (gateway/unsignalledsummary.go) runs before the answer's last byte, but
// a store that does not answer (PostgreSQL gone silent while the provider
// thought) holds the answer at most summaryRecordWait (2 s), not until
// the store's or the client's own deadline: the client gets the whole
// answer, 200, no error after it. Before, the write ran under the
// request's context alone and the answer waited for it: this client gave
// up after 15 s.
func TestSummaryRecordDoesNotHoldTheAnswer(t *testing.T) {
	link := pgtest.Faulty(t, pgtest.URL(t))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := l.Addr().String()
	l.Close()
	s := start(t, map[string]string{"CONTEXTD_DATABASE_URL": link.URL, "CONTEXTD_METRICS_ADDR": metrics})
	// Cut the silent connections before contextd stops, so its recordings
	// waiting on them end at once.
	t.Cleanup(link.Sever)
	c := newCompressingClient(t, s, "F")
	c.rounds(3)
	c.finish()
	// The database goes silent while the provider writes the summary.
	s.fake.Set(func(f *gatewaytest.Fake) { f.Before = func(string) { link.Silence() } })
	s.fake.Script(gatewaytest.Reply{Text: "<analysis>read it all</analysis>\n<state_snapshot>Fix calc.py: add() subtracted; every file was read.</state_snapshot>"})
	ask := append(slices.Clone(c.msgs), map[string]any{"role": "user", "content": qwenDirective})
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": ask})
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url("/v1/chat/completions"), bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	at := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the summary request, its store silent: %v after %v, want its answer within the record's 2 s bound", err, time.Since(at))
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("the summary request, its store silent: reading the answer: %v after %v", err, time.Since(at))
	}
	took := time.Since(at)
	if resp.StatusCode != http.StatusOK || len(out.Choices) != 1 || out.Choices[0].Message.Content == "" {
		t.Fatalf("the summary request, its store silent: %d %+v, want 200 and the summary", resp.StatusCode, out)
	}
	if h := resp.Header.Get("X-Contextd-History"); h != "aside" {
		t.Errorf("the summary request: history %q, want aside", h)
	}
	t.Logf("the answer ended %v after the request (the record's bound: 2 s)", took)
	if took > 12*time.Second {
		t.Errorf("the answer took %v, its store silent: held past the record's bound", took)
	}
	// The record that did not land in time is counted (docs/operations.md).
	mr, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Body.Close()
	page, _ := io.ReadAll(mr.Body)
	if want := `contextd_gateway_summary_records_total{outcome="late"} 1`; !strings.Contains(string(page), want) {
		t.Errorf("/metrics has no %s", want)
	}
}
