// Package clients drives the real agent CLIs (Claude Code, Codex CLI, Qwen
// Code, an unmodified OpenAI-SDK loop) through contextd's gateway to a
// scripted fake provider on loopback, and checks what reached the provider
// and what contextd recorded (see clients_test.go).
//
// The provider here plays the model: it speaks Anthropic Messages, OpenAI
// Responses and Chat Completions (JSON and SSE, event by event), validates
// every request the way the provider refuses it, counts its tokens with
// the model's encoding, bills them with prompt caching as the providers
// do, and answers from a script that it reads from the conversation
// itself: the human prompt says how many tool rounds to make, each tool
// call's id carries its round, and the tools are the ones the client
// declared.
package clients

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/tokens"
)

// Usage is what the provider billed for one request, in the provider's
// categories (uncached input, cache reads, cache writes, output), as
// gatewaytest's fake bills it.
type Usage = gatewaytest.Bill

// Call is one request the provider received.
type Call struct {
	API    string // messages, responses, chat, or the path when unknown
	Conv   string // the conversation the test was running (SetConv)
	Model  string
	Header http.Header
	Raw    []byte
	Body   map[string]any
	// Problems are the reasons the real provider would refuse it.
	Problems []string
	// Billed is the usage reported (zero when refused).
	Billed Usage
	// Round is the tool round the provider answered (0: a text answer).
	Round int
	// Side is a request outside the agent loop (no tools, or no task
	// prompt: a title, a topic check), answered with a short text.
	Side bool
	// Texts are the human-typed prompts the request carries (user text
	// parts that contain a TASK= marker).
	Texts []string
	// Compaction: the request asks for a summary of the history (a
	// CLI's compaction prompt, checkpoint.go).
	Compaction bool
	// Cut: the provider cut the call's stream (Fault.CutAfter); it is
	// billed what its events had reported (markCut), and Whole is what it
	// would have been billed whole.
	Cut   bool
	Whole Usage
}

// Provider is the scripted fake provider.
type Provider struct {
	srv    *httptest.Server
	enc    *tokens.Encoding
	window int64 // the model's context window, as contextd's registry states it

	mu    sync.Mutex
	calls []Call
	// cache holds the prefixes the provider has cached: Anthropic's up to
	// each cache_control mark, OpenAI's every prefix of every request.
	cache map[[32]byte]bool
	// reasoning maps a function call the provider answered to the
	// reasoning item (Responses) or signed thinking (Messages) before it.
	reasoning map[string]string
	seq       int
	conv      string
	// issued is the latest round's call the provider made in each turn
	// (by SetConv's label): what a model remembers from a summary that
	// names its trail (checkpointCall).
	issued map[string]string
	// sameSummary: the provider answers every compaction prompt with the
	// same summary (sameCheckpoint), as a model may, and goes on from it
	// at the latest round it made (checkpoint.go).
	sameSummary bool
	// caching is how the provider caches: "" as the providers do,
	// "none" never (every token uncached, no cache fields), "cold" a
	// cache that never hits (Anthropic writes the marked prefix on every
	// call, OpenAI reads nothing), as a provider whose cache expires
	// between calls.
	caching string
	// faults are the failures the provider answers instead of serving
	// (faults.go), by the number of the request; received counts the
	// requests, faulted the faults answered by exchange.
	faults   map[int]Fault
	received int
	faulted  map[string]int
	cutting  map[*http.Request]int
	// parallel is how many tool calls the provider makes each round
	// (1 when unset): the same call again under ids of its own, as a
	// model calling tools in parallel.
	parallel int
}

// calls is how many tool calls the provider makes in a round.
func (p *Provider) callsPerRound() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(1, p.parallel)
}

// headerExchange names the exchange of an upstream call (the recording
// proxy's exchange.seq, which contextd passes upstream).
const headerExchange = "X-Test-Exchange"

// headerConv names the conversation of a request when CLIs run at the
// same time (the recording proxy sets it; SetConv's label otherwise).
const headerConv = "X-Test-Conv"

// SetConv labels the requests that follow with the conversation the test
// runs (one CLI process at a time).
func (p *Provider) SetConv(conv string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conv = conv
}

// NewProvider starts the provider on a loopback port.
func NewProvider(enc *tokens.Encoding, window int64) *Provider {
	p := &Provider{enc: enc, window: window, cache: map[[32]byte]bool{}, reasoning: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", p.faulting(p.messages))
	mux.HandleFunc("POST /v1/responses", p.faulting(p.responses))
	mux.HandleFunc("POST /v1/chat/completions", p.faulting(p.chat))
	mux.HandleFunc("/", p.unknown)
	p.srv = httptest.NewServer(mux)
	return p
}

// recall is what the provider sent before a tool call it answered (the
// signed thinking, the reasoning item): gatewaytest's refusals check that
// a client sends it back.
func (p *Provider) recall(id string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sent, ok := p.reasoning[id]
	return sent, ok
}

// Close stops the provider.
func (p *Provider) Close() { p.srv.Close() }

// URL is the provider's base URL (without /v1).
func (p *Provider) URL() string { return p.srv.URL }

// Calls returns every request received so far.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

func (p *Provider) unknown(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.calls = append(p.calls, Call{Conv: p.conv, API: r.Method + " " + r.URL.Path, Header: r.Header.Clone(), Raw: raw,
		Problems: []string{"no such route: " + r.Method + " " + r.URL.Path}})
	p.mu.Unlock()
	http.Error(w, `{"error":{"type":"not_found_error","message":"no such route"}}`, http.StatusNotFound)
}

// segment is one cacheable unit of a request in the provider's order
// (tools, system, messages): key is its bytes (what the cache matches),
// text what the model reads of it (what is counted), mark whether a cache
// mark ends it.
type segment struct {
	key, text string
	mark      bool
	// frame is the tokens the segment costs beyond its text (a message's
	// or item's framing).
	frame int64
}

// framing is the tokens each message or item costs beyond its content
// (OpenAI's published rule: <|start|>role<|message|>...<|end|>).
const framing = 3

// priming is the tokens every request costs after its last message (the
// published rule's <|start|>assistant<|message|>): a segment of its own,
// last, never cached.
var priming = segment{key: "\x00priming", frame: 3}

// sep separates the strings a segment's text holds: each is counted by
// itself (the published rule counts each value apart; joined, their
// tokens would merge across the seams).
const sep = "\x00"

// prefixes returns the running digest and token count at the end of each
// segment.
func (p *Provider) prefixes(segs []segment) ([][32]byte, []int64) {
	var sums [][32]byte
	var counts []int64
	h := [32]byte{}
	n := int64(0)
	for _, s := range segs {
		h = sha256.Sum256(append(h[:], s.key...))
		n += s.frame
		for _, t := range strings.Split(s.text, sep) {
			n += int64(p.enc.Count(t))
		}
		sums = append(sums, h)
		counts = append(counts, n)
	}
	return sums, counts
}

// item is the segment of one message, item or block: matched by all its
// bytes, counted by what the model reads (its texts, a call's name and
// arguments, a result's output; ids, signatures and JSON keys are not
// read) plus the framing.
func item(v any, mark bool) segment {
	var text strings.Builder
	var read func(v any, key string)
	read = func(v any, key string) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				read(x[k], k)
			}
		case []any:
			for _, e := range x {
				read(e, key)
			}
		case string:
			switch key {
			case "text", "content", "output", "arguments", "name", "role", "thinking", "input", "summary", "refusal":
				text.WriteString(x)
				text.WriteString(sep)
			}
		}
		if key == "input" {
			if m, ok := v.(map[string]any); ok {
				b, _ := json.Marshal(m)
				text.Write(b)
				text.WriteString(sep)
			}
		}
	}
	read(v, "")
	frame := int64(framing)
	if m, ok := v.(map[string]any); ok {
		if _, role := m["role"].(string); role {
			if _, named := m["name"].(string); named {
				frame += perName // a message's name (a call's is its own)
			}
		}
	}
	// The published rule's framing of what the item holds beyond its
	// texts: 3 a tool call, and the role of an item that has none of
	// its own (a Responses call is the assistant's, a result the tool's;
	// an Anthropic tool_result block is a message of its own).
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			switch x["type"] {
			case "function_call", "custom_tool_call":
				frame += perToolCall
				text.WriteString("assistant" + sep)
			case "function_call_output", "custom_tool_call_output":
				text.WriteString("tool" + sep)
			case "tool_use":
				frame += perToolCall
			case "tool_result":
				frame += framing
				text.WriteString("tool" + sep)
			}
			if calls, ok := x["tool_calls"].([]any); ok {
				frame += perToolCall * int64(len(calls))
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return segment{key: canonical(v), text: text.String(), mark: mark, frame: frame}
}

// perName is the tokens a message's name costs beyond its text (the
// published rule's tokens_per_name).
const perName = 1

// perToolCall is the tokens a tool call costs beyond its name and
// arguments (the published rule's framing of a call).
const perToolCall = 3

// systemSegment is a system prompt sent apart from the messages
// (Anthropic's system, Responses' instructions): framed as the system
// message it is read as.
func systemSegment(key, text string, mark bool) segment {
	return segment{key: key, text: "system" + sep + text, mark: mark, frame: framing}
}

// minCacheable is the shortest prefix either provider caches.
const minCacheable = 1024

// billAnthropic bills a Messages request: a cache hit is the longest
// cached prefix ending at a segment boundary at or before the last cache
// mark; the tokens from there to the last mark are written; the rest is
// uncached input.
func (p *Provider) billAnthropic(segs []segment) Usage {
	sums, counts := p.prefixes(segs)
	total := int64(0)
	if len(counts) > 0 {
		total = counts[len(counts)-1]
	}
	last := -1
	for i, s := range segs {
		if s.mark {
			last = i
		}
	}
	if p.caching == "none" {
		return Usage{Uncached: total}
	}
	read := int64(0)
	for i := last; i >= 0 && p.caching != "cold"; i-- {
		if p.cache[sums[i]] {
			read = counts[i]
			break
		}
	}
	write := int64(0)
	if last >= 0 && counts[last] >= minCacheable && counts[last] > read {
		write = counts[last] - read
		for i := 0; i <= last; i++ {
			p.cache[sums[i]] = true
		}
	}
	return Usage{Uncached: total - read - write, CacheRead: read, CacheWrite: write}
}

// billOpenAI bills a Chat Completions or Responses request: the cached
// tokens are the longest prefix seen before, at least 1024, in steps of
// 128; every prefix of this request is cached after it.
func (p *Provider) billOpenAI(segs []segment) Usage {
	sums, counts := p.prefixes(segs)
	total := int64(0)
	if len(counts) > 0 {
		total = counts[len(counts)-1]
	}
	if p.caching == "none" || p.caching == "cold" {
		return Usage{Uncached: total}
	}
	read := int64(0)
	for i := len(sums) - 1; i >= 0; i-- {
		if p.cache[sums[i]] {
			read = counts[i]
			break
		}
	}
	if read < minCacheable {
		read = 0
	}
	read -= read % 128
	for _, s := range sums {
		p.cache[s] = true
	}
	return Usage{Uncached: total - read, CacheRead: read}
}

// canonical is a JSON value's bytes without cache marks (which do not
// change what the model reads).
func canonical(v any) string {
	var strip func(v any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				if k != "cache_control" {
					out[k] = strip(e)
				}
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = strip(e)
			}
			return out
		}
		return v
	}
	b, _ := json.Marshal(strip(v))
	return string(b)
}

func hasMark(v any) bool {
	m, ok := v.(map[string]any)
	return ok && m["cache_control"] != nil
}

// record stores a call and, when it is valid, bills it; the caller
// answers 400 when it is not.
func (p *Provider) record(c Call, bill func() Usage, outText string) (Call, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.Conv = p.conv
	if conv := c.Header.Get(headerConv); conv != "" {
		c.Conv = conv
	}
	ok := len(c.Problems) == 0
	if ok {
		c.Billed = bill()
		c.Billed.Output = int64(p.enc.Count(outText)) + 1
		if in := c.Billed.Input(); in > p.window {
			c.Problems = append(c.Problems, fmt.Sprintf("prompt is too long: %d tokens > %d maximum", in, p.window))
			c.Billed, ok = Usage{}, false
		}
	}
	p.calls = append(p.calls, c)
	return c, ok
}

func (p *Provider) nextID(prefix string, round, of int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	if round == 0 {
		return fmt.Sprintf("%s%04d", prefix, p.seq)
	}
	id := fmt.Sprintf("%sr%dof%d_%04d", prefix, round, of, p.seq)
	if p.issued == nil {
		p.issued = map[string]string{}
	}
	p.issued[p.conv] = id
	return id
}

var (
	roundID    = regexp.MustCompile(`r(\d+)of(\d+)_`)
	taskMarker = regexp.MustCompile(`TASK=(\S+)`)
	roundsMark = regexp.MustCompile(`ROUNDS=(\d+)`)
	dirMarker  = regexp.MustCompile(`DIR=(\S+)`)
)

// plan is what the model does next: round (1-based) of total, or the
// final answer when round > total; task names the conversation.
type plan struct {
	round, total int
	task         string
	side         bool // a request with no task prompt (a title, a check): answered with text
}

// nextStep reads the conversation's position: the last item is a tool
// result whose call id carries its round, or the human prompt that says
// how many rounds to make.
func nextStep(lastCallID string, humans []string) plan {
	task := ""
	if len(humans) > 0 {
		if m := taskMarker.FindStringSubmatch(humans[len(humans)-1]); m != nil {
			task = m[1]
		}
	}
	if m := roundID.FindStringSubmatch(lastCallID); m != nil {
		r, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		return plan{round: r + 1, total: n, task: task}
	}
	if lastCallID != "" || len(humans) == 0 {
		return plan{side: true, task: task}
	}
	n := 0
	if m := roundsMark.FindStringSubmatch(humans[len(humans)-1]); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	if task == "" {
		return plan{side: true}
	}
	return plan{round: 1, total: n, task: task}
}

// Final is the answer that ends a turn of task.
func Final(task string, total int) string {
	return fmt.Sprintf("DONE %s after %d tool rounds: every check passed.", task, total)
}

// tool is a tool the client declared: its name and the property names of
// its input schema (or freeform, for a custom tool).
type tool struct {
	name     string
	props    []string
	types    map[string]string // each property's JSON type
	freeform bool
}

func toolOf(name string, schema any, freeform bool) tool {
	t := tool{name: name, freeform: freeform, types: map[string]string{}}
	if m, ok := schema.(map[string]any); ok {
		if props, ok := m["properties"].(map[string]any); ok {
			for k, v := range props {
				t.props = append(t.props, k)
				if d, ok := v.(map[string]any); ok {
					t.types[k], _ = d["type"].(string)
				}
			}
			sort.Strings(t.props)
		}
	}
	return t
}

func (t tool) prop(names ...string) string {
	for _, n := range names {
		for _, p := range t.props {
			if p == n {
				return p
			}
		}
	}
	return ""
}

// call is one scripted tool call: the tool's name and its input (JSON
// arguments, or the freeform text of a custom tool).
type call struct {
	name, input string
	freeform    bool
}

// Workspace is where the scripted calls read and edit: the test creates
// it (see newWorkspace) and the CLIs run in it.
type Workspace struct {
	Dir   string
	Files []string // files to read, several KB each
	Notes string   // the file the script edits: it ends with EditMarker
}

// workspaceOf reads the workspace from the human prompt's DIR= marker:
// DIR/part-N.txt are read, DIR/notes.txt is edited.
func workspaceOf(humans []string) Workspace {
	dir := "/nonexistent"
	for _, h := range humans {
		if m := dirMarker.FindStringSubmatch(h); m != nil {
			dir = m[1]
		}
	}
	ws := Workspace{Dir: dir, Notes: filepath.Join(dir, "notes.txt")}
	for i := range WorkspaceFiles {
		ws.Files = append(ws.Files, filepath.Join(dir, fmt.Sprintf("part-%d.txt", i)))
	}
	return ws
}

// WorkspaceFiles is how many files a workspace holds to read.
const WorkspaceFiles = 5

// EditMarker ends the notes file; every edit inserts a line before it.
const EditMarker = "END-OF-NOTES"

// shellScript prints several KB that name the round.
func shellScript(task string, round int) string {
	return fmt.Sprintf(`for i in $(seq 1 70); do echo "%s round %d line $i: the quick brown fox jumps over the lazy dog 0123456789"; done`, task, round)
}

// choose picks the tool call of a round from the client's tools: shell
// most rounds, a file read every third, an edit every fifth.
func choose(tools []tool, ws Workspace, task string, round int) (call, error) {
	find := func(names ...string) (tool, bool) {
		for _, n := range names {
			for _, t := range tools {
				if t.name == n {
					return t, true
				}
			}
		}
		return tool{}, false
	}
	args := func(m map[string]any) string { b, _ := json.Marshal(m); return string(b) }
	file := ws.Files[round%len(ws.Files)]
	if round%5 == 0 {
		if t, ok := find("Edit", "edit", "replace"); ok {
			return call{name: t.name, input: args(map[string]any{t.prop("file_path", "filePath", "path", "absolute_path"): ws.Notes,
				t.prop("old_string", "oldString", "old_str"): EditMarker, t.prop("new_string", "newString", "new_str"): fmt.Sprintf("%s round %d checked\n%s", task, round, EditMarker)})}, nil
		}
		if t, ok := find("apply_patch"); ok {
			patch := fmt.Sprintf("*** Begin Patch\n*** Update File: %s\n@@\n-%s\n+%s round %d checked\n+%s\n*** End Patch\n", ws.Notes, EditMarker, task, round, EditMarker)
			if t.freeform {
				return call{name: t.name, input: patch, freeform: true}, nil
			}
			return call{name: t.name, input: args(map[string]any{t.prop("input", "patch"): patch})}, nil
		}
	}
	if round%3 == 0 {
		if t, ok := find("Read", "read_file", "read"); ok {
			return call{name: t.name, input: args(map[string]any{t.prop("file_path", "filePath", "absolute_path", "path"): file})}, nil
		}
	}
	script := shellScript(task, round)
	if round%3 == 0 {
		script = "cat " + file
	}
	if t, ok := find("Bash", "run_shell_command", "bash"); ok {
		a := map[string]any{t.prop("command", "cmd"): script}
		if d := t.prop("description"); d != "" {
			a[d] = fmt.Sprintf("round %d", round)
		}
		return call{name: t.name, input: args(a)}, nil
	}
	if t, ok := find("exec_command"); ok {
		return call{name: t.name, input: args(map[string]any{t.prop("cmd", "command"): script, "workdir": ws.Dir})}, nil
	}
	if t, ok := find("shell", "shell_command", "local_shell"); ok {
		if t.types["command"] == "array" {
			return call{name: t.name, input: args(map[string]any{"command": []string{"bash", "-lc", script}, "workdir": ws.Dir})}, nil
		}
		return call{name: t.name, input: args(map[string]any{t.prop("command", "cmd"): script, "workdir": ws.Dir})}, nil
	}
	var names []string
	for _, t := range tools {
		names = append(names, t.name)
	}
	return call{}, fmt.Errorf("no shell tool among %v", names)
}

// refuse answers a request the provider refuses: 400 with its problems,
// in the provider's error shape.
func refuse(w http.ResponseWriter, r *http.Request, c Call) {
	gatewaytest.WriteError(w, r.URL.Path, http.StatusBadRequest, "invalid_request_error", strings.Join(c.Problems, "; "))
}

// humanTexts returns the text parts that carry a TASK= marker: what the
// test typed (scaffolding the clients add never has one).
func humanTexts(texts []string) []string {
	var out []string
	for _, t := range texts {
		if taskMarker.MatchString(t) {
			out = append(out, t)
		}
	}
	return out
}
