// Package gatewaytest is a fake model provider for the gateway's tests and
// benchmarks: one HTTP server that speaks OpenAI Chat Completions, OpenAI
// Responses and Anthropic Messages as the providers' API references
// describe them (JSON bodies, and SSE event by event), answers from a
// script, reports usage, and records and checks every request it receives
// the way the providers would refuse it (unpaired tool calls, roles that
// do not alternate, more than four cache marks, empty text blocks).
package gatewaytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Reply is one scripted answer.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
	// Thinking, for Anthropic and Responses, adds a thinking block (a
	// reasoning item) before the text.
	Thinking string
	// EmptyReasoning, for Responses, adds a reasoning item with an empty
	// summary (as models not asked for summaries send it).
	EmptyReasoning bool
	// Interleave, for an Anthropic stream, starts every content block
	// before the first delta (as the API may interleave them).
	Interleave bool
	// More, for Chat Completions, are the choices after the first (as a
	// request with n > 1 gets them).
	More []Reply
	// Compaction, for Anthropic, starts the answer with a compaction
	// block of this summary (server-side compaction, compaction.go).
	Compaction string
}

// ToolCall is a scripted call. An empty ID is sent as "id": "" (as some
// OpenAI-compatible servers do).
type ToolCall struct {
	ID, Name, Arguments string
}

// Request is one request the fake received.
type Request struct {
	Path   string
	Query  string
	Header http.Header
	Body   map[string]any
	Raw    []byte
	// Problems are the reasons the provider would refuse it (empty: valid).
	Problems []string
	// Bill is the usage the fake answered it with (zero when it failed).
	Bill Bill
}

// Fake is the fake provider.
type Fake struct {
	Server *httptest.Server

	mu       sync.Mutex
	script   []Reply
	requests []Request
	// Totals of the usage it reported, and the calls it answered (billed):
	// InputTokens is all the input it counted, of which UncachedTokens,
	// CacheReadTokens and CacheWriteTokens are the parts (Bill).
	InputTokens, OutputTokens                         int64
	UncachedTokens, CacheReadTokens, CacheWriteTokens int64
	billed                                            int
	// last is the body of the previous request per path: the prompt
	// cache (cache.go).
	last map[string][]byte
	// Pause between SSE events; Hang makes it never answer until the
	// client goes away; Status, when set, is returned with an error body;
	// DropAfter cuts a stream after that many events.
	Pause     time.Duration
	Hang      bool
	Status    int
	DropAfter int
	// Expand makes the fake call contextd_expand (expand.go); FailFrom,
	// when set, fails the requests from that one on (1: the first) with
	// a 500 in the provider's error shape.
	Expand   ExpandMode
	FailFrom int
	// FailMessage, when set, is the error message of those failures.
	FailMessage string
	// NoStream answers streamed requests with a JSON body (as a proxy
	// that drops streaming would).
	NoStream bool
	// Before, when set, runs with each request's path before the fake
	// answers it (outside the fake's lock): what another client does
	// while the provider is thinking.
	Before func(path string)
	// Answer, when set, answers each request by its body as sent (ok),
	// before the script: the answer of one of several conversations at
	// once, which a queue would hand to whichever came first.
	Answer func(raw []byte) (Reply, bool)
	// Endless makes a Chat Completions stream send text deltas of this
	// many bytes, one after the other, until the client goes away; Ended
	// then receives the number of deltas written (buffered).
	Endless int
	Ended   chan int
	// FirstEventAt is when the first SSE event of the last stream was
	// written; LastEventAt when the stream ended.
	FirstEventAt, LastEventAt time.Time
}

// New starts a fake on a loopback port.
func New() *Fake {
	f := &Fake{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", f.chat)
	mux.HandleFunc("POST /v1/responses", f.responses)
	mux.HandleFunc("POST /v1/messages", f.messages)
	mux.HandleFunc("/", f.other)
	f.Server = httptest.NewServer(mux)
	return f
}

// streams reports whether to answer body as a stream.
func (f *Fake) streams(body map[string]any) bool {
	stream, _ := body["stream"].(bool)
	f.mu.Lock()
	defer f.mu.Unlock()
	return stream && !f.NoStream
}

// Close stops the fake.
func (f *Fake) Close() { f.Server.Close() }

// OpenAIBase is the base URL in OpenAI's convention (with /v1).
func (f *Fake) OpenAIBase() string { return f.Server.URL + "/v1" }

// AnthropicBase is the base URL in Anthropic's convention (without /v1).
func (f *Fake) AnthropicBase() string { return f.Server.URL }

// Script queues answers; when the queue is empty the fake answers "ok".
func (f *Fake) Script(r ...Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, r...)
}

// Requests returns what the fake received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Reset forgets requests and totals.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests, f.InputTokens, f.OutputTokens, f.billed, f.script = nil, 0, 0, 0, nil
	f.UncachedTokens, f.CacheReadTokens, f.CacheWriteTokens, f.last = 0, 0, 0, nil
}

// Billed is how many requests the fake answered with usage (not an error).
func (f *Fake) Billed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.billed
}

// Totals returns the usage reported so far.
func (f *Fake) Totals() (int64, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.InputTokens, f.OutputTokens
}

// Billed returns the usage reported so far, part by part.
func (f *Fake) BilledTotals() Bill {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Bill{Uncached: f.UncachedTokens, CacheRead: f.CacheReadTokens, CacheWrite: f.CacheWriteTokens, Output: f.OutputTokens}
}

// receive reads and records a request, and returns the next reply, the
// usage to report and the request's index in f.requests (startSSE's req): input tokens are the body's bytes / 4, a stand-in that
// is the same for every door, split by the prompt cache (cache.go).
func (f *Fake) receive(w http.ResponseWriter, r *http.Request, check func(map[string]any) []string) (map[string]any, Reply, Bill, int, bool) {
	// As OpenAI's API does: any page may read its answers.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	raw, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	before := f.Before
	f.mu.Unlock()
	if before != nil {
		before(r.URL.Path)
	}
	var body map[string]any
	problems := []string(nil)
	if err := json.Unmarshal(raw, &body); err != nil {
		problems = append(problems, "body is not JSON: "+err.Error())
	} else {
		problems = check(body)
	}
	f.mu.Lock()
	f.requests = append(f.requests, Request{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Raw: raw, Problems: problems})
	reply, expanding := expandReply(f.Expand, r.URL.Path, body)
	answered := false
	if !expanding && f.Answer != nil {
		reply, answered = f.Answer(raw)
	}
	if !expanding && !answered {
		reply = Reply{Text: "ok"}
		if len(f.script) > 0 {
			reply, f.script = f.script[0], f.script[1:]
		}
	}
	in, out := int64((len(raw)-dropped(r.URL.Path, body))/4), int64(len(reply.Text)/4+1+4*len(reply.ToolCalls))
	if n, ok := compactedInput(r.URL.Path, body, raw, reply); ok {
		in = int64(n / 4)
	}
	bill := Bill{Uncached: in, Output: out}
	status, hang := f.Status, f.Hang
	msg := fmt.Sprintf("fake upstream failure %d", status)
	if f.FailFrom > 0 && len(f.requests) >= f.FailFrom {
		status = http.StatusInternalServerError
		msg = fmt.Sprintf("fake upstream failure %d", status)
		if f.FailMessage != "" {
			msg = f.FailMessage
		}
	}
	if status == 0 && !hang && len(problems) == 0 {
		bill = f.cache(r.URL.Path, raw, body, in, out)
		f.requests[len(f.requests)-1].Bill = bill
		f.InputTokens += in
		f.OutputTokens += out
		f.UncachedTokens += bill.Uncached
		f.CacheReadTokens += bill.CacheRead
		f.CacheWriteTokens += bill.CacheWrite
		f.billed++
	}
	idx := len(f.requests) - 1
	f.mu.Unlock()
	if hang {
		<-r.Context().Done()
		return nil, reply, Bill{}, -1, false
	}
	if status != 0 {
		typ := "server_error"
		if anthropicPath(r.URL.Path) {
			typ = "api_error"
		}
		WriteError(w, r.URL.Path, status, typ, msg)
		return nil, reply, Bill{}, -1, false
	}
	if len(problems) > 0 {
		WriteError(w, r.URL.Path, http.StatusBadRequest, "invalid_request_error", strings.Join(problems, "; "))
		return nil, reply, Bill{}, -1, false
	}
	return body, reply, bill, idx, true
}

// sse writes events one by one, pausing between them, and stops early
// when DropAfter says so. A stream cut so is billed as Anthropic bills
// one: what it had reported before the cut (rebill).
type sse struct {
	f     *Fake
	w     http.ResponseWriter
	n     int
	first bool
	// req is the request's index in f.requests (-1: not billed), bill
	// its whole bill and reported what its events told so far.
	req            int
	bill, reported Bill
}

// startSSE starts the stream answering request req (its index in
// f.requests, as receive returned it; -1: not billed), billed bill.
func (f *Fake) startSSE(w http.ResponseWriter, req int, bill Bill) *sse {
	StartSSE(w)
	return &sse{f: f, w: w, first: true, req: req, bill: bill}
}

// tells notes what an event about to be written reports of the bill:
// Anthropic's message_start the input (and one output token), its
// message_delta and OpenAI's usage chunk or response.completed all of it.
func (s *sse) tells(name string, data any) {
	m, _ := data.(map[string]any)
	switch {
	case name == "message_start":
		s.reported = s.bill
		s.reported.Output = 1
	case name == "message_delta", name == "response.completed", name == "" && m != nil && m["usage"] != nil:
		s.reported = s.bill
	}
}

// rebill bills a stream cut before its end what it had reported: the
// assumption is Anthropic's billing of the input its message_start
// reported (and of the output it told), and for OpenAI, whose usage comes
// last, nothing (a provider that bills more would bill what contextd
// then records as an estimate: the gateway's ledger counts estimates
// apart, store.LedgerEstimated).
func (s *sse) rebill() {
	if s.req < 0 {
		return
	}
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.req >= len(f.requests) { // Reset since
		return
	}
	f.requests[s.req].Bill = s.reported
	f.InputTokens -= s.bill.Input() - s.reported.Input()
	f.OutputTokens -= s.bill.Output - s.reported.Output
	f.UncachedTokens -= s.bill.Uncached - s.reported.Uncached
	f.CacheReadTokens -= s.bill.CacheRead - s.reported.CacheRead
	f.CacheWriteTokens -= s.bill.CacheWrite - s.reported.CacheWrite
	if s.reported == (Bill{}) {
		f.billed--
	}
	s.req = -1
}

// WriteError answers with status and an error of type typ in the
// provider's shape: Anthropic's for /v1/messages, OpenAI's otherwise.
func WriteError(w http.ResponseWriter, path string, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var b []byte
	if anthropicPath(path) {
		b, _ = json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	} else {
		b, _ = json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	}
	_, _ = w.Write(b)
}

// StartSSE answers with an event stream (test/clients' provider too).
func StartSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// WriteEvent writes one server-sent event (named, unless name is empty;
// data JSON, or a string as it is) and flushes it.
func WriteEvent(w http.ResponseWriter, name string, data any) {
	var b []byte
	if str, ok := data.(string); ok {
		b = []byte(str)
	} else {
		b, _ = json.Marshal(data)
	}
	if name != "" {
		fmt.Fprintf(w, "event: %s\n", name)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

// event writes one event; false when the stream is to be cut.
func (s *sse) event(name string, data any) bool {
	s.f.mu.Lock()
	drop, pause := s.f.DropAfter, s.f.Pause
	s.f.mu.Unlock()
	if drop > 0 && s.n >= drop {
		s.rebill()
		// Half an event, then the connection drops.
		_, _ = io.WriteString(s.w, "data: {\"trunc")
		s.w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	if s.n > 0 && pause > 0 {
		time.Sleep(pause)
	}
	s.tells(name, data)
	WriteEvent(s.w, name, data)
	s.f.mu.Lock()
	if s.first {
		s.f.FirstEventAt, s.first = time.Now(), false
	}
	s.f.LastEventAt = time.Now()
	s.f.mu.Unlock()
	s.n++
	return true
}

// split cuts s into up to three pieces, as deltas arrive.
func split(s string) []string {
	if len(s) < 3 {
		return []string{s}
	}
	a, b := len(s)/3, 2*len(s)/3
	for a > 0 && !utf8Start(s[a]) {
		a--
	}
	for b > a && !utf8Start(s[b]) {
		b--
	}
	return []string{s[:a], s[a:b], s[b:]}
}

func utf8Start(c byte) bool { return c&0xC0 != 0x80 }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(v)
	_, _ = w.Write(b)
}

// Set changes the fake's behaviour (Pause, Hang, Status, DropAfter) under
// its lock.
func (f *Fake) Set(fn func(f *Fake)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}
