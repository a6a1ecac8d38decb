package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// summarizerModel is the model contextd's summarizer asks for
// (CONTEXTD_SUMMARIZER=openai:soak-summarizer); its requests go to a fake
// of their own so that the agents' fake bills only the agents' calls.
const summarizerModel = "soak-summarizer"

// faultRates are the chances, per request, of each provider fault.
type faultRates struct {
	Fail, Throttle, Hang, Drop, SlowSummary float64
}

// provider is a fault-injecting fake model provider: in front of two
// gatewaytest fakes (which speak the real wire formats and report usage),
// it fails requests with a 5xx, throttles them with 429 and retry-after,
// hangs until the caller gives up, cuts streams after their headers, and
// delays summaries. A request it faults never reaches a fake, so the
// agents' fake's Billed and Totals are exactly what was answered.
type provider struct {
	agents, summaries *gatewaytest.Fake
	server            *httptest.Server
	rates             faultRates
	on                atomic.Bool // faults are injected only while on

	mu     sync.Mutex
	faults map[string]int
	// answered records when each billed agent call ended, to tell the
	// calls a replica's kill -9 may have left unrecorded.
	answered []time.Time
}

func newProvider(rates faultRates) *provider {
	p := &provider{agents: gatewaytest.New(), summaries: gatewaytest.New(), rates: rates, faults: map[string]int{}}
	p.server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

func (p *provider) close() {
	p.server.CloseClientConnections()
	p.server.Close()
	p.agents.Close()
	p.summaries.Close()
}

func (p *provider) openAIBase() string    { return p.server.URL + "/v1" }
func (p *provider) anthropicBase() string { return p.server.URL }

func (p *provider) count(kind string) {
	p.mu.Lock()
	p.faults[kind]++
	p.mu.Unlock()
}

// faultCounts returns how many of each fault were injected.
func (p *provider) faultCounts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.faults))
	for k, v := range p.faults {
		out[k] = v
	}
	return out
}

// answeredBetween counts the billed agent calls that ended in [from, to].
func (p *provider) answeredBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, t := range p.answered {
		if !t.Before(from) && !t.After(to) {
			n++
		}
	}
	return n
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	var head struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(raw, &head)
	r.Body = io.NopCloser(bytes.NewReader(raw))
	anthropic := strings.HasPrefix(r.URL.Path, "/v1/messages")
	if head.Model == summarizerModel {
		if p.on.Load() && rand.Float64() < p.rates.SlowSummary {
			p.count("slow summary")
			select {
			case <-time.After(time.Duration(2000+rand.IntN(4000)) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		p.summaries.Server.Config.Handler.ServeHTTP(w, r)
		return
	}
	if p.on.Load() {
		x := rand.Float64()
		switch {
		case x < p.rates.Fail:
			p.count("5xx")
			status := []int{500, 502, 503, 529}[rand.IntN(4)]
			if status == 529 && !anthropic {
				status = 503
			}
			providerError(w, anthropic, status, "")
			return
		case x < p.rates.Fail+p.rates.Throttle:
			p.count("429")
			providerError(w, anthropic, http.StatusTooManyRequests, "1")
			return
		case x < p.rates.Fail+p.rates.Throttle+p.rates.Hang:
			p.count("hang")
			select { // until the caller gives up (bounded all the same)
			case <-r.Context().Done():
			case <-time.After(2 * time.Minute):
			}
			return
		case x < p.rates.Fail+p.rates.Throttle+p.rates.Hang+p.rates.Drop && head.Stream:
			p.count("dropped stream")
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "data: {\"trunc")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	p.agents.Server.Config.Handler.ServeHTTP(sw, r)
	if sw.status == http.StatusOK {
		p.mu.Lock()
		p.answered = append(p.answered, time.Now())
		p.mu.Unlock()
	}
}

// providerError writes an error in the provider's shape; retryAfter, when
// set, is the retry-after header (seconds).
func providerError(w http.ResponseWriter, anthropic bool, status int, retryAfter string) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	msg := fmt.Sprintf("soak: injected %d", status)
	if anthropic {
		kind := "api_error"
		switch status {
		case http.StatusTooManyRequests:
			kind = "rate_limit_error"
		case 529:
			kind = "overloaded_error"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "param": nil, "code": nil}})
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }
func (s *statusWriter) Flush()               { s.ResponseWriter.(http.Flusher).Flush() }
