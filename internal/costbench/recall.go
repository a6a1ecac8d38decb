package costbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/probes"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/summarize"
	"github.com/contextd/contextd/internal/tokens"
)

// RecallStrategy is one way of keeping a transcript inside the window, as
// the recall benchmark compares them.
type RecallStrategy struct {
	Name   string
	Policy compaction.Overrides
	// LLM: summaries by the fake LLM summarizer (see fakeLLM); else the
	// extractive one.
	LLM bool
	// DropMiddle keeps the first user message and drops the oldest turns
	// after it to fit, on the client side (nothing to expand).
	DropMiddle bool
}

// RecallStrategies are the compared strategies: observation masking (the
// prune tier; JetBrains' baseline, summarizing only what cannot fit
// otherwise), the default policy with the
// extractive summarizer and with an LLM's (the fake), and drop-middle.
func RecallStrategies() []RecallStrategy {
	// Summarize only when the request would not fit at all (prune and
	// drop-middle alone fail some transcripts: a task of 1,425 tokens and a
	// latest step of 12,000).
	over := 1.0
	return []RecallStrategy{
		{Name: "masking (prune; summary only when over)", Policy: compaction.Overrides{CriticalThreshold: &over, EmergencyThreshold: &over}},
		{Name: "extractive summary", Policy: compaction.Overrides{}},
		{Name: "LLM summary (fake)", Policy: compaction.Overrides{}, LLM: true},
		{Name: "drop-middle", DropMiddle: true},
	}
}

// Recall counts probes by class and kind after every compaction.
type Recall struct {
	Seen, InView, InSummary, OneExpand int
}

func (r *Recall) add(o Recall) {
	r.Seen += o.Seen
	r.InView += o.InView
	r.InSummary += o.InSummary
	r.OneExpand += o.OneExpand
}

// ViewShare is the share of probes verbatim in what is sent.
func (r Recall) ViewShare() float64 { return ratio(float64(r.InView), float64(r.Seen)) }

// ExpandShare is the share in view or one expand away.
func (r Recall) ExpandShare() float64 {
	return ratio(float64(r.InView+r.OneExpand), float64(r.Seen))
}

// RecallResult sums one strategy's replays at one window.
type RecallResult struct {
	Strategy      string
	Window        int64
	Calls         int
	Compactions   int
	Input, Prefix int64
	Invalid       int
	// ByClass and ByKind count probes after every compaction.
	ByClass map[probes.Class]*Recall
	ByKind  map[probes.Kind]*Recall
	// OverTarget counts the compactions whose request is above the
	// target a compaction aims at (the cache target of the usable window:
	// every strategy here is cache-aware), OverWarning those above the
	// warning threshold (the next call compacts again).
	OverTarget, OverWarning int
	// Misses counts the probes not in view by kind and why (recallmiss.go).
	Misses map[probes.Kind]map[string]int
	// ByFile counts them by transcript (recallbyfile.go).
	ByFile map[string]fileMisses
	// Summaries counts the distinct summary texts the replays produced,
	// each checked against its transcript's originals (cutWords): Cuts
	// says what any of them cut (a word, an identifier, a path).
	Summaries int
	Cuts      []string
	// Trails: of those summaries, how many fold lines of their trail, and
	// the trail lines they show whole, dense and folded (summarize.TrailShape).
	Folding, Whole, Dense, Folded int
	// Judge sums the judged probes (RunRecall with a judge).
	Judge JudgeStats
}

// Anthropic is the bill in units of uncached input tokens (as Result).
func (r RecallResult) Anthropic() float64 {
	return AnthropicRead*float64(r.Prefix) + AnthropicWrite*float64(r.Input-r.Prefix)
}

// All sums every class.
func (r RecallResult) All() Recall {
	var a Recall
	for _, c := range r.ByClass {
		a.add(*c)
	}
	return a
}

func (r *RecallResult) merge(o RecallResult) {
	r.Calls += o.Calls
	r.Compactions += o.Compactions
	r.Input += o.Input
	r.Prefix += o.Prefix
	r.Invalid += o.Invalid
	r.Summaries += o.Summaries
	r.Cuts = append(r.Cuts, o.Cuts...)
	r.Folding += o.Folding
	r.Whole += o.Whole
	r.Dense += o.Dense
	r.Folded += o.Folded
	r.Judge.merge(o.Judge)
	r.mergeMisses(o)
	r.mergeByFile(o)
	r.OverTarget += o.OverTarget
	r.OverWarning += o.OverWarning
	for c, v := range o.ByClass {
		r.class(c).add(*v)
	}
	for k, v := range o.ByKind {
		r.kind(k).add(*v)
	}
}

func (r *RecallResult) class(c probes.Class) *Recall {
	if r.ByClass == nil {
		r.ByClass = map[probes.Class]*Recall{}
	}
	if r.ByClass[c] == nil {
		r.ByClass[c] = &Recall{}
	}
	return r.ByClass[c]
}

func (r *RecallResult) kind(k probes.Kind) *Recall {
	if r.ByKind == nil {
		r.ByKind = map[probes.Kind]*Recall{}
	}
	if r.ByKind[k] == nil {
		r.ByKind[k] = &Recall{}
	}
	return r.ByKind[k]
}

// RunRecall replays every file at every window with every strategy, each
// replay in a fresh embedded store under tmp, as many at once as
// GOMAXPROCS, and scores the probes after every compaction. One fake LLM
// summarizer (answering at once) serves the LLM strategy. With a judge
// (nil: none), a sample of the probes is also asked of its model over the
// view after every compaction (Judge).
func RunRecall(ctx context.Context, files []string, windows []int64, strategies []RecallStrategy, tmp string, judge *Judge) ([]RecallResult, error) {
	models, encodings, loaded, err := setup(files, windows)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(&fakeLLM{})
	defer srv.Close()
	var asker summarize.Asker
	if judge != nil {
		if asker, err = judge.asker(srv.URL + "/v1/"); err != nil {
			return nil, err
		}
	}
	eps := map[string]summarize.Endpoint{summarize.ProviderOpenAI: {BaseURL: srv.URL + "/v1/", APIKey: "bench", Timeout: 30 * time.Second}}
	out := make([]RecallResult, len(windows)*len(strategies))
	for k := range out {
		out[k] = RecallResult{Strategy: strategies[k%len(strategies)].Name, Window: windows[k/len(strategies)]}
	}
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for k := range out {
		w, s := windows[k/len(strategies)], strategies[k%len(strategies)]
		for i, f := range files {
			g.Go(func() error {
				spec := "extractive"
				if s.LLM {
					spec = "openai:gpt-4o-mini"
				}
				set, err := summarize.NewSet(spec, eps)
				if err != nil {
					return err
				}
				e, done, err := freshEngine(ctx, tmp, encodings, models, engine.WithSummarizers(set))
				if err != nil {
					return err
				}
				defer done()
				r, err := replayRecall(ctx, e, w, s, loaded[i].system, loaded[i].msgs, judge, asker)
				if err != nil {
					return fmt.Errorf("%s, %s at %d: %w", filepath.Base(f), s.Name, w, err)
				}
				r.byFile(filepath.Base(f))
				mu.Lock()
				out[k].merge(r)
				mu.Unlock()
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// replayRecall drives one transcript as an agent loop (as replay does) and
// scores the probes of what was appended so far after every compaction.
func replayRecall(ctx context.Context, e *engine.Engine, window int64, s RecallStrategy, system string, msgs []chat.Message, judge *Judge, asker summarize.Asker) (RecallResult, error) {
	r := RecallResult{Strategy: s.Name, Window: window}
	model, policy := modelName(window), s.Policy
	if s.DropMiddle {
		off := false
		model, policy.AutoCompact = "bench-unbounded", &off
	}
	v, err := e.CreateSession(ctx, store.DefaultTenant, engine.NewSession{Model: model, System: system, Policy: policy})
	if err != nil {
		return r, err
	}
	// The log's ids are msg_1, msg_2, ... in order (engine.stageAppend).
	stored := slices.Clone(msgs)
	for i := range stored {
		stored[i].ID = fmt.Sprintf("msg_%d", i+1)
	}
	events := probes.Extract(stored)
	def := compaction.Defaults(window)
	usable := window - def.ReservedOutputTokens
	fixed := v.SystemTokens + v.ToolsTokens + int64(tokens.DefaultFraming.ReplyPriming)
	expanded := map[string]string{} // synthetic id → text of its originals
	var prev, summaries []string
	dropFrom := 1
	appended := 0
	var pending []chat.Message
	step := func() error {
		res, err := e.PrepareContext(ctx, store.DefaultTenant, v.ID, engine.PrepareInput{Messages: pending})
		if err != nil {
			return err
		}
		appended += len(pending)
		pending = nil
		view, compacted := res.Messages, res.Status.Compacted
		if s.DropMiddle {
			from := dropMiddle(view, fixed, usable, int64(def.Target*float64(usable)), dropFrom)
			compacted = from > dropFrom
			dropFrom = from
			if len(view) > 0 && from > 1 {
				view = append([]chat.Message{view[0]}, view[from:]...)
			}
		}
		used, same := fixed, int64(0)
		for i, m := range view {
			used += m.Tokens
			if i < len(prev) && int64(i) == same && prev[i] == m.ID {
				same++
			}
		}
		if len(prev) > 0 {
			r.Prefix += fixed - int64(tokens.DefaultFraming.ReplyPriming)
			for _, m := range view[:same] {
				r.Prefix += m.Tokens
			}
		}
		r.Calls++
		r.Input += used
		if used > usable || compaction.ValidatePairs(view) != nil || len(view) == 0 || view[0].Role != chat.RoleUser {
			r.Invalid++
		}
		prev = prev[:0]
		for _, m := range view {
			prev = append(prev, m.ID)
		}
		if !compacted {
			return nil
		}
		r.Compactions++
		if !s.DropMiddle && used > int64(def.CacheTarget*float64(usable)) {
			r.OverTarget++
		}
		if !s.DropMiddle && used > int64(def.WarningThreshold*float64(usable)) {
			r.OverWarning++
		}
		for _, m := range view {
			if m.Kind == chat.KindSummary {
				if t := m.Text(); !slices.Contains(summaries, t) {
					summaries = append(summaries, t)
				}
			}
		}
		ps := probes.Of(events, appended)
		status, err := scoreView(ctx, e, v.ID, view, ps, expanded, &r)
		if err != nil || judge == nil {
			return err
		}
		return judge.judgeView(ctx, asker, system, view, ps, status, &r)
	}
	for _, m := range msgs {
		if m.Role == chat.RoleAssistant && len(pending) > 0 {
			if err := step(); err != nil {
				return r, err
			}
		}
		pending = append(pending, m)
	}
	if err := step(); err != nil {
		return r, err
	}
	// The property: no summary cuts a word, an identifier or a path.
	var originals strings.Builder
	originals.WriteString(system + "\n")
	for i := range msgs {
		originals.WriteString(renderMessage(&msgs[i]) + "\n")
	}
	r.Summaries = len(summaries)
	for _, sum := range summaries {
		r.Cuts = append(r.Cuts, cutWords(sum, originals.String())...)
		whole, dense, folded := summarize.TrailShape(sum)
		r.Whole, r.Dense, r.Folded = r.Whole+whole, r.Dense+dense, r.Folded+folded
		if folded > 0 {
			r.Folding++
		}
	}
	return r, nil
}

// scoreView classifies every probe against a view: in view (its message is
// there, or its needles are verbatim in what is sent; InSummary when only a
// summary holds them), one expand away (a placeholder or summary of the
// view names an id whose originals hold it), or lost; it returns each
// probe's score.
func scoreView(ctx context.Context, e *engine.Engine, session string, view []chat.Message, ps []probes.Probe, expanded map[string]string, r *RecallResult) ([]Recall, error) {
	ids := map[string]bool{}
	var sent, summaries strings.Builder
	var synthetic, named []string
	for i := range view {
		m := &view[i]
		ids[m.ID] = true
		if m.Kind == chat.KindSummary {
			summaries.WriteString(renderMessage(m))
			// A summary's trail names the earlier summaries whose
			// originals hold what it folded or shows only densely (the
			// fold line, a dense line's head): they are one expand away
			// too.
			named = append(named, summaryIDRe.FindAllString(m.Text(), -1)...)
		} else {
			sent.WriteString(renderMessage(m))
		}
		if m.Kind == chat.KindSummary || m.Kind == chat.KindPlaceholder {
			synthetic = append(synthetic, m.ID)
		}
	}
	seen := map[string]bool{}
	for _, id := range named { // those the view does not hold, each once
		if !ids[id] && !seen[id] {
			seen[id] = true
			synthetic = append(synthetic, id)
		}
	}
	for _, id := range synthetic {
		if _, ok := expanded[id]; ok {
			continue
		}
		var b strings.Builder
		for token := ""; ; {
			x, err := e.ExpandMessage(ctx, store.DefaultTenant, session, id, token)
			if err != nil {
				return nil, fmt.Errorf("expand %s: %w", id, err)
			}
			for j := range x.Originals {
				b.WriteString("\x00id:" + x.Originals[j].ID + "\x00")
				b.WriteString(renderMessage(&x.Originals[j]))
			}
			if token = x.Next; token == "" {
				break
			}
		}
		expanded[id] = b.String()
	}
	var behind strings.Builder
	for _, id := range synthetic {
		behind.WriteString(expanded[id])
	}
	sentText, sumText, behindText := sent.String(), summaries.String(), behind.String()
	all := holdsAll
	kinds := syntheticKinds(view, named)
	status := make([]Recall, len(ps))
	for i, p := range ps {
		var one Recall
		one.Seen = 1
		switch {
		case ids[p.Origin] || all(sentText, p.Needles):
			one.InView = 1
		case all(sumText, p.Needles) || all(sentText+sumText, p.Needles):
			one.InView, one.InSummary = 1, 1
		case strings.Contains(behindText, "\x00id:"+p.Origin+"\x00") || all(behindText, p.Needles) || namesID(sentText+sumText, p.Origin):
			one.OneExpand = 1
		}
		if one.InView == 0 {
			r.addMiss(p.Kind, missReason(p, synthetic, kinds, expanded, func(id string) bool { return namesID(sentText+sumText, id) }), 1)
		}
		r.class(p.Class()).add(one)
		r.kind(p.Kind).add(one)
		status[i] = one
	}
	return status, nil
}

// summaryIDRe matches a summary's message id (engine: sum_<round>_<n>).
var summaryIDRe = regexp.MustCompile(`\bsum_[0-9]+_[0-9]+\b`)

// namesID reports whether text names message id (not as the prefix of a
// longer id): ExpandMessage, and the expand tool, read any message by id.
func namesID(text, id string) bool {
	if id == "" {
		return false
	}
	for rest := text; ; {
		i := strings.Index(rest, id)
		if i < 0 {
			return false
		}
		rest = rest[i+len(id):]
		if rest == "" || rest[0] < '0' || rest[0] > '9' {
			return true
		}
	}
}

// renderMessage is a message as sent: its text, tool calls (name, id, the
// arguments as written and each string value decoded) and results.
func renderMessage(m *chat.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			b.WriteString(p.Text)
		case chat.PartToolCall:
			b.WriteString(p.ToolCall.Name + " " + p.ToolCall.ID + " " + p.ToolCall.Arguments)
			var args map[string]any
			if json.Unmarshal([]byte(p.ToolCall.Arguments), &args) == nil {
				for _, k := range slices.Sorted(mapsKeys(args)) {
					switch v := args[k].(type) {
					case string:
						b.WriteString("\n" + v)
					case []any:
						for _, w := range v {
							if s, ok := w.(string); ok {
								b.WriteString("\n" + s)
							}
						}
					}
				}
			}
		case chat.PartToolResult:
			b.WriteString(p.ToolResult.Content)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// dropMiddle returns where the kept tail starts (at or after from): the
// view is its first message and the tail. When the request would not fit,
// the tail starts at the first user turn or assistant step after which
// the request is within target, orphaning no tool result.
func dropMiddle(view []chat.Message, fixed, usable, target int64, from int) int {
	if len(view) < 2 {
		return from
	}
	suffix := make([]int64, len(view)+1)
	for i := len(view) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1] + view[i].Tokens
	}
	head := fixed + view[0].Tokens
	if head+suffix[from] <= usable {
		return from
	}
	calls := map[string]int{}
	for i, m := range view {
		for _, p := range m.Parts {
			if p.Type == chat.PartToolCall {
				calls[p.ToolCall.ID] = i
			}
		}
	}
	for c := from; c < len(view); c++ {
		if head+suffix[c] <= target && (view[c].Role == chat.RoleUser || view[c].Role == chat.RoleAssistant) && !orphans(view, c, calls) {
			return c
		}
	}
	return len(view) - 1
}

// PrintRecall writes the results as a Markdown table.
func PrintRecall(w io.Writer, results []RecallResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| window\t strategy\t compactions\t probes\t in view\t of which in a summary\t within one expand\t artifacts in view\t instructions in view\t state in view\t commands in view\t error lines in view\t user messages in view\t input tokens\t Anthropic units\t invalid\t")
	fmt.Fprintln(tw, "|---\t---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
	pct := func(x float64) string { return fmt.Sprintf("%.1f %%", 100*x) }
	get := func(r RecallResult, k probes.Kind) Recall {
		if v := r.ByKind[k]; v != nil {
			return *v
		}
		return Recall{}
	}
	getc := func(r RecallResult, c probes.Class) Recall {
		if v := r.ByClass[c]; v != nil {
			return *v
		}
		return Recall{}
	}
	for _, r := range results {
		a := r.All()
		fmt.Fprintf(tw, "| %dk\t %s\t %d\t %d\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %d\t %.0f\t %d\t\n",
			r.Window/1024, r.Strategy, r.Compactions, a.Seen, pct(a.ViewShare()), pct(ratio(float64(a.InSummary), float64(a.Seen))), pct(a.ExpandShare()),
			pct(getc(r, probes.Artifact).ViewShare()), pct(getc(r, probes.Instruction).ViewShare()), pct(getc(r, probes.State).ViewShare()),
			pct(get(r, probes.Command).ViewShare()), pct(get(r, probes.Error).ViewShare()), pct(get(r, probes.User).ViewShare()),
			r.Input, r.Anthropic(), r.Invalid)
	}
	tw.Flush()
	summaries, cuts := 0, 0
	for _, r := range results {
		summaries += r.Summaries
		cuts += len(r.Cuts)
		for _, c := range r.Cuts[:min(len(r.Cuts), 5)] {
			fmt.Fprintf(w, "\n%dk, %s: a summary cut %s", r.Window/1024, r.Strategy, c)
		}
	}
	fmt.Fprintf(w, "\nNo summary cuts a word, an identifier or a path: %d summaries checked against their originals, %d cuts.\n", summaries, cuts)
	fmt.Fprintln(w, "\nTrails: summaries whose trail folds lines into a count; trail lines shown whole, dense (text alone) and folded")
	for _, r := range results {
		if r.Summaries > 0 {
			fmt.Fprintf(w, "%dk, %s: %d of %d fold; lines %d whole, %d dense, %d folded\n", r.Window/1024, r.Strategy, r.Folding, r.Summaries, r.Whole, r.Dense, r.Folded)
		}
	}
	fmt.Fprintln(w, "\nBy kind: in view / within one expand (probes)")
	fmt.Fprintln(w)
	kinds := []probes.Kind{probes.File, probes.Command, probes.Test, probes.Error, probes.URL, probes.User, probes.Standing, probes.LastEdit, probes.FailingTest}
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprint(tw, "| window\t strategy\t")
	for _, k := range kinds {
		fmt.Fprintf(tw, " %s\t", k)
	}
	fmt.Fprint(tw, "\n|---\t---\t")
	for range kinds {
		fmt.Fprint(tw, "---:\t")
	}
	fmt.Fprintln(tw)
	for _, r := range results {
		fmt.Fprintf(tw, "| %dk\t %s\t", r.Window/1024, r.Strategy)
		for _, k := range kinds {
			v := get(r, k)
			if v.Seen == 0 {
				fmt.Fprint(tw, " -\t")
				continue
			}
			fmt.Fprintf(tw, " %.0f / %.0f %% (%d)\t", 100*v.ViewShare(), 100*v.ExpandShare(), v.Seen)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
