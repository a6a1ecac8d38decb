package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkGatewayLatency measures what the gateway adds to a model call:
// the same Chat Completions requests sent to the fake provider directly
// and through contextd (embedded SQLite), for conversations of 100 and
// 1,000 messages that an agent extends by one exchange per call (the
// steady state: the session exists, its log is matched, the new turn is
// appended and the reply recorded). It reports the p50 and p99 of each
// path and the added time; "stream" reports the time to the first
// streamed byte. "api" is the same call made by an agent written against
// contextd's API (PrepareContext over HTTP/JSON, then the provider), so
// "over-api" is what zero-code integration costs beyond it.
//
//	go test -run '^$' -bench BenchmarkGatewayLatency -benchtime 300x ./test/gateway/
func BenchmarkGatewayLatency(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("messages=%d/%s", n, map[bool]string{false: "json", true: "stream"}[stream])
			b.Run(name, func(b *testing.B) { benchLatency(b, n, stream) })
		}
	}
}

func benchLatency(b *testing.B, n int, stream bool) {
	s := start(b, nil)
	// Conversations that each call extends a little: b.N calls spread
	// over them keep each near n messages.
	convs := make([][]any, 20)
	for c := range convs {
		msgs := []any{map[string]any{"role": "system", "content": "You are a coding agent."}}
		for i := range n {
			role := []string{"user", "assistant"}[i%2]
			msgs = append(msgs, map[string]any{"role": role, "content": fmt.Sprintf("conversation %d message %d: %s", c, i, strings.Repeat("lorem ipsum dolor sit amet ", 8))})
		}
		if n%2 == 0 {
			msgs = append(msgs, map[string]any{"role": "user", "content": "go on"})
		}
		convs[c] = msgs
	}
	body := func(msgs []any) []byte {
		v := map[string]any{"model": "gpt-4o", "messages": msgs}
		if stream {
			v["stream"] = true
		}
		out, _ := json.Marshal(v)
		return out
	}
	// call sends body and returns the time to the first byte of the body
	// (stream) or to the whole answer, and the answer.
	call := func(url string, b []byte) (time.Duration, []byte, error) {
		t0 := time.Now()
		resp, err := http.Post(url, "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		if stream {
			if _, err := r.Peek(1); err != nil {
				return 0, nil, err
			}
			d := time.Since(t0)
			_, _ = io.Copy(io.Discard, r)
			return d, nil, nil
		}
		out, err := io.ReadAll(r)
		if resp.StatusCode != http.StatusOK {
			return 0, nil, fmt.Errorf("status %d: %s", resp.StatusCode, out)
		}
		return time.Since(t0), out, err
	}
	// First calls create the sessions.
	for c := range convs {
		if _, _, err := call(s.url("/v1/chat/completions"), body(convs[c])); err != nil {
			b.Fatal(err)
		}
		convs[c] = append(convs[c], map[string]any{"role": "assistant", "content": "ok"})
	}
	// The same conversations kept through contextd's own API, as an agent
	// written against it does: PrepareContext with the new turn (over
	// Connect, HTTP/JSON), then the provider directly.
	apiConvs := make([]string, len(convs))
	for c := range convs {
		apiConvs[c] = fmt.Sprintf("api-%d", c)
		var msgs []any
		for _, m := range convs[c][1:] {
			mm := m.(map[string]any)
			msgs = append(msgs, map[string]any{"role": "ROLE_" + strings.ToUpper(mm["role"].(string)), "parts": []any{map[string]any{"text": map[string]any{"text": mm["content"]}}}})
		}
		s.rpc("CreateSession", map[string]any{"id": apiConvs[c], "model": "gpt-4o", "systemPrompt": "You are a coding agent."}, nil)
		for len(msgs) > 0 {
			n := min(len(msgs), 500)
			s.rpc("AppendMessages", map[string]any{"sessionId": apiConvs[c], "messages": msgs[:n]}, nil)
			msgs = msgs[n:]
		}
	}
	viaAPI := func(c, i int, req []byte) time.Duration {
		t0 := time.Now()
		turn := []any{map[string]any{"role": "ROLE_ASSISTANT", "parts": []any{map[string]any{"text": map[string]any{"text": "ok"}}}},
			map[string]any{"role": "ROLE_USER", "parts": []any{map[string]any{"text": map[string]any{"text": fmt.Sprintf("step %d", i)}}}}}
		s.rpc("PrepareContext", map[string]any{"sessionId": apiConvs[c], "messages": turn}, nil)
		if _, _, err := call(s.fake.OpenAIBase()+"/chat/completions", req); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	var direct, via, api []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c := i % len(convs)
		convs[c] = append(convs[c], map[string]any{"role": "user", "content": fmt.Sprintf("step %d", i)})
		req := body(convs[c])
		d, _, err := call(s.fake.OpenAIBase()+"/chat/completions", req)
		if err != nil {
			b.Fatal(err)
		}
		direct = append(direct, d)
		api = append(api, viaAPI(c, i, req))
		d, _, err = call(s.url("/v1/chat/completions"), req)
		if err != nil {
			b.Fatal(err)
		}
		via = append(via, d)
		convs[c] = append(convs[c], map[string]any{"role": "assistant", "content": "ok"})
		// An agent runs its tools between calls: the previous answer's
		// recording is not in the next call's way.
		time.Sleep(2 * time.Millisecond)
	}
	b.StopTimer()
	p := func(ds []time.Duration, q float64) float64 {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(p(direct, 0.50), "direct-p50-ms")
	b.ReportMetric(p(via, 0.50), "gateway-p50-ms")
	b.ReportMetric(p(via, 0.50)-p(direct, 0.50), "added-p50-ms")
	b.ReportMetric(p(direct, 0.99), "direct-p99-ms")
	b.ReportMetric(p(via, 0.99), "gateway-p99-ms")
	b.ReportMetric(p(via, 0.99)-p(direct, 0.99), "added-p99-ms")
	b.ReportMetric(p(api, 0.50), "api-p50-ms")
	b.ReportMetric(p(via, 0.50)-p(api, 0.50), "over-api-p50-ms")
	b.ReportMetric(0, "ns/op")
}
