// Package costbench replays agent transcripts through PrepareContext as an
// agent would and prices every request under prompt-cache billing: the
// previous request is fully cached, the next one hits the prefix it shares
// with it. It compares compaction strategies by input tokens, prefix-cache
// hit rate, billed units (Anthropic and OpenAI cache pricing), retention of
// the file paths the assistant wrote, and invalid views. No LLM is needed:
// summaries are the built-in extractive ones.
package costbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"text/tabwriter"

	"golang.org/x/sync/errgroup"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/tokens"
)

// Pricing of cached input relative to uncached input (= 1).
const (
	AnthropicRead  = 0.10 // cache reads
	AnthropicWrite = 1.25 // cache writes: every uncached token is written
	OpenAIRead     = 0.50 // gpt-4o cached input; no write premium
)

// Strategy is one way of keeping a transcript inside the window.
type Strategy struct {
	Name   string
	Policy compaction.Overrides
	// Sliding drops the oldest messages to fit instead of compacting (the
	// common naive baseline; done here, on the client side).
	Sliding bool
}

// Strategies returns the compared strategies: the default policy as it was
// before cache-aware compaction, the cache-aware default, and a sliding
// window.
func Strategies() []Strategy {
	off := 0
	return []Strategy{
		{Name: "default without cache-awareness", Policy: compaction.Overrides{CachePaybackCalls: &off}},
		{Name: "cache-aware default", Policy: compaction.Overrides{}},
		{Name: "sliding window", Sliding: true},
	}
}

// Result sums one strategy's replays at one window.
type Result struct {
	Strategy    string
	Window      int64
	Transcripts int
	Calls       int
	Compactions int
	Input       int64 // request tokens, all calls
	Prefix      int64 // tokens shared with the previous request
	FactsSeen   int   // (path, compaction) pairs checked
	FactsKept   int
	Invalid     int
}

// HitRate is the share of input tokens a prefix cache served.
func (r Result) HitRate() float64 { return ratio(float64(r.Prefix), float64(r.Input)) }

// Anthropic is the bill in units of uncached input tokens: cache reads at
// 0.1, everything else written to the cache at 1.25.
func (r Result) Anthropic() float64 {
	return AnthropicRead*float64(r.Prefix) + AnthropicWrite*float64(r.Input-r.Prefix)
}

// OpenAI is the bill in units of uncached input tokens: cached input at 0.5.
func (r Result) OpenAI() float64 { return OpenAIRead*float64(r.Prefix) + float64(r.Input-r.Prefix) }

// Retention is the share of the assistant's file paths found verbatim in
// the view after each compaction.
func (r Result) Retention() float64 { return ratio(float64(r.FactsKept), float64(r.FactsSeen)) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 1
	}
	return a / b
}

// Models are the registry entries the replays use: a window per size, and
// an unbounded one for the sliding window (which fits on the client).
func Models(windows []int64) []tokens.Model {
	out := []tokens.Model{{Name: "bench-unbounded", Provider: "bench", ContextWindow: 1 << 40, MaxOutputTokens: 4096, Encoding: tokens.CL100KBase}}
	for _, w := range windows {
		out = append(out, tokens.Model{Name: modelName(w), Provider: "bench", ContextWindow: w, MaxOutputTokens: w / 8, Encoding: tokens.CL100KBase})
	}
	return out
}

func modelName(window int64) string { return fmt.Sprintf("bench-%dk", window/1024) }

// Run replays every file at every window with every strategy (see RunEach)
// and sums the replays of each strategy at each window.
func Run(ctx context.Context, files []string, windows []int64, strategies []Strategy, tmp string) ([]Result, error) {
	each, err := RunEach(ctx, files, windows, strategies, tmp)
	if err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(windows)*len(strategies))
	for _, w := range windows {
		for _, s := range strategies {
			out = append(out, Result{Strategy: s.Name, Window: w})
		}
	}
	for _, results := range each {
		for k, r := range results {
			out[k].add(r)
		}
	}
	return out, nil
}

// RunEach replays every file at every window with every strategy, each
// replay in a fresh embedded store under tmp, as many at once as
// GOMAXPROCS. It returns one row per file, in the order of files, of one
// Result per window and strategy (windows outer, strategies inner).
func RunEach(ctx context.Context, files []string, windows []int64, strategies []Strategy, tmp string) ([][]Result, error) {
	models, encodings, loaded, err := setup(files, windows)
	if err != nil {
		return nil, err
	}
	out := make([][]Result, len(files))
	for i := range out {
		out[i] = make([]Result, len(windows)*len(strategies))
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for k := range len(windows) * len(strategies) {
		w, s := windows[k/len(strategies)], strategies[k%len(strategies)]
		for i, f := range files {
			g.Go(func() error { // each goroutine writes only its own out[i][k]
				r := Result{Strategy: s.Name, Window: w, Transcripts: 1}
				if err := replayIn(ctx, tmp, encodings, models, w, s, loaded[i].system, loaded[i].msgs, &r); err != nil {
					return fmt.Errorf("%s, %s at %d: %w", filepath.Base(f), s.Name, w, err)
				}
				out[i][k] = r
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// add sums another result of the same strategy and window into r.
func (r *Result) add(o Result) {
	r.Transcripts += o.Transcripts
	r.Calls += o.Calls
	r.Compactions += o.Compactions
	r.Input += o.Input
	r.Prefix += o.Prefix
	r.FactsSeen += o.FactsSeen
	r.FactsKept += o.FactsKept
	r.Invalid += o.Invalid
}

// freshEngine is an engine over a fresh embedded store in a directory of
// its own under tmp; done closes the store and removes the directory.
func freshEngine(ctx context.Context, tmp string, encodings *tokens.Encodings, models *tokens.Registry, opts ...engine.Option) (e *engine.Engine, done func(), err error) {
	dir, err := os.MkdirTemp(tmp, "costbench-")
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return engine.New(encodings, models, st, opts...), func() { st.Close(); os.RemoveAll(dir) }, nil
}

// replayIn replays one transcript in a fresh embedded store under tmp.
func replayIn(ctx context.Context, tmp string, encodings *tokens.Encodings, models *tokens.Registry, window int64, s Strategy, system string, msgs []chat.Message, r *Result) error {
	e, done, err := freshEngine(ctx, tmp, encodings, models)
	if err != nil {
		return err
	}
	defer done()
	return replay(ctx, e, window, s, system, msgs, r)
}

// replay drives one transcript as an agent loop: PrepareContext with what
// happened since the last model call, before each assistant message.
func replay(ctx context.Context, e *engine.Engine, window int64, s Strategy, system string, msgs []chat.Message, r *Result) error {
	model, policy := modelName(window), s.Policy
	if s.Sliding {
		off := false
		model, policy.AutoCompact = "bench-unbounded", &off
	}
	v, err := e.CreateSession(ctx, store.DefaultTenant, engine.NewSession{Model: model, System: system, Policy: policy})
	if err != nil {
		return err
	}
	usable := window - compaction.Defaults(window).ReservedOutputTokens
	fixed := v.SystemTokens + v.ToolsTokens + int64(tokens.DefaultFraming.ReplyPriming)
	written := map[string]bool{} // paths the assistant wrote so far
	var prev []string            // message ids of the previous request
	slideFrom := 0
	var pending []chat.Message
	step := func() error {
		res, err := e.PrepareContext(ctx, store.DefaultTenant, v.ID, engine.PrepareInput{Messages: pending})
		if err != nil {
			return err
		}
		for _, m := range pending {
			if m.Role == chat.RoleAssistant {
				for _, p := range assistantPaths(&m) {
					written[p] = true
				}
			}
		}
		pending = nil
		view, compacted := res.Messages, res.Status.Compacted
		if s.Sliding {
			from := slide(view, fixed, usable, slideFrom)
			compacted = from > slideFrom
			view, slideFrom = view[from:], from
		}
		used, same := fixed, int64(0)
		for i, m := range view {
			used += m.Tokens
			if i < len(prev) && int64(i) == same && prev[i] == m.ID {
				same++
			}
		}
		prefix := int64(0)
		if len(prev) > 0 {
			prefix = fixed - int64(tokens.DefaultFraming.ReplyPriming)
			for _, m := range view[:same] {
				prefix += m.Tokens
			}
		}
		r.Calls++
		r.Input += used
		r.Prefix += prefix
		if used > usable || compaction.ValidatePairs(view) != nil || len(view) == 0 || view[0].Role != chat.RoleUser {
			r.Invalid++
		}
		if compacted {
			r.Compactions++
			text := viewText(view)
			for p := range written {
				r.FactsSeen++
				if strings.Contains(text, p) {
					r.FactsKept++
				}
			}
		}
		prev = prev[:0]
		for _, m := range view {
			prev = append(prev, m.ID)
		}
		return nil
	}
	for _, m := range msgs {
		if m.Role == chat.RoleAssistant && len(pending) > 0 {
			if err := step(); err != nil {
				return err
			}
		}
		pending = append(pending, m)
	}
	return step()
}

// slide returns the first index (at or after from) of the shortest-dropping
// suffix of view that fits: it starts at a user message that is not a tool
// result and orphans no tool result, or, when no such start fits, at the
// first start that fits at all (an invalid view, counted as such).
func slide(view []chat.Message, fixed, usable int64, from int) int {
	suffix := make([]int64, len(view)+1)
	for i := len(view) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1] + view[i].Tokens
	}
	calls := map[string]int{}
	for i, m := range view {
		for _, p := range m.Parts {
			if p.Type == chat.PartToolCall {
				calls[p.ToolCall.ID] = i
			}
		}
	}
	fallback := -1
	for c := from; c < len(view); c++ {
		if fixed+suffix[c] > usable {
			continue
		}
		if fallback < 0 {
			fallback = c
		}
		if view[c].Role == chat.RoleUser && !orphans(view, c, calls) {
			return c
		}
	}
	if fallback < 0 {
		return max(len(view)-1, from)
	}
	return fallback
}

// orphans reports whether cutting before c leaves a tool result whose call
// is before c.
func orphans(view []chat.Message, c int, calls map[string]int) bool {
	for _, m := range view[c:] {
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult {
				if at, ok := calls[p.ToolResult.ToolCallID]; ok && at < c {
					return true
				}
			}
		}
	}
	return false
}

// pathPattern matches file paths with a directory or a known extension.
var pathPattern = regexp.MustCompile(`(?:[\w.-]+/)+[\w.-]+\.[A-Za-z]{1,8}\b`)

// assistantPaths are the file paths an assistant message wrote, in its text
// or its tool calls' arguments.
func assistantPaths(m *chat.Message) []string {
	var out []string
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			out = append(out, pathPattern.FindAllString(p.Text, -1)...)
		case chat.PartToolCall:
			out = append(out, pathPattern.FindAllString(p.ToolCall.Arguments, -1)...)
		}
	}
	return out
}

func viewText(view []chat.Message) string {
	var b strings.Builder
	for _, m := range view {
		for _, p := range m.Parts {
			switch p.Type {
			case chat.PartText:
				b.WriteString(p.Text)
			case chat.PartToolCall:
				b.WriteString(p.ToolCall.Arguments)
			case chat.PartToolResult:
				b.WriteString(p.ToolResult.Content)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Print writes the results as a Markdown table.
func Print(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| window\t strategy\t calls\t compactions\t input tokens\t prefix-cache hit\t Anthropic units (of uncached)\t OpenAI units (of uncached)\t fact retention\t invalid views\t")
	fmt.Fprintln(tw, "|---\t---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
	for _, r := range results {
		fmt.Fprintf(tw, "| %dk\t %s\t %d\t %d\t %d\t %.1f %%\t %.0f (%.3f)\t %.0f (%.3f)\t %.1f %%\t %d\t\n",
			r.Window/1024, r.Strategy, r.Calls, r.Compactions, r.Input, 100*r.HitRate(),
			r.Anthropic(), r.Anthropic()/float64(max(r.Input, 1)), r.OpenAI(), r.OpenAI()/float64(max(r.Input, 1)),
			100*r.Retention(), r.Invalid)
	}
	tw.Flush()
}

// Load reads a corpus transcript (JSON lines of OpenAI-style messages): the
// leading system message becomes the system prompt.
func Load(path string) (string, []chat.Message, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	system := ""
	var msgs []chat.Message
	for sc.Scan() {
		var l struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []struct {
				ID        string `json:"id"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return "", nil, fmt.Errorf("%s: %w", path, err)
		}
		m := chat.Message{Role: chat.Role(l.Role)}
		switch {
		case l.Role == "system" && len(msgs) == 0 && system == "":
			system = l.Content
			continue
		case l.Role == "tool":
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: l.ToolCallID, Content: l.Content}}}
		default:
			if l.Content != "" || len(l.ToolCalls) == 0 {
				m.Parts = append(m.Parts, chat.Part{Type: chat.PartText, Text: l.Content})
			}
			for _, c := range l.ToolCalls {
				m.Parts = append(m.Parts, chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}})
			}
		}
		msgs = append(msgs, m)
	}
	return system, msgs, sc.Err()
}

// transcript is a loaded corpus file.
type transcript struct {
	system string
	msgs   []chat.Message
}

// setup is what a run needs: a registry with the bench models for the
// windows, the encodings, and every file loaded.
func setup(files []string, windows []int64) (*tokens.Registry, *tokens.Encodings, []transcript, error) {
	models, err := tokens.NewRegistry(Models(windows))
	if err != nil {
		return nil, nil, nil, err
	}
	loaded, err := loadAll(files)
	if err != nil {
		return nil, nil, nil, err
	}
	return models, tokens.NewEncodings(), loaded, nil
}

// loadAll loads every file.
func loadAll(files []string) ([]transcript, error) {
	loaded := make([]transcript, len(files))
	for i, f := range files {
		var err error
		if loaded[i].system, loaded[i].msgs, err = Load(f); err != nil {
			return nil, err
		}
	}
	return loaded, nil
}
