package costbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/summarize"
	"github.com/contextd/contextd/internal/telemetry"
	"github.com/contextd/contextd/internal/tokens"
)

// SummaryMode is one way a replay's summaries are written.
type SummaryMode struct {
	Name string
	// LLM: summaries by a local fake OpenAI-compatible model that answers
	// after the replay's LLM delay; else the extractive summarizer.
	LLM bool
	// Background: background compaction jobs on.
	Background bool
	// Deadline of each PrepareContext call (0: none).
	Deadline time.Duration
}

// SummaryModes are the compared modes: the extractive baseline, an LLM
// summarizer awaited in the call (with and without a deadline), and the
// LLM in background jobs.
func SummaryModes() []SummaryMode {
	return []SummaryMode{
		{Name: "extractive", Deadline: time.Second},
		{Name: "LLM in the call", LLM: true},
		{Name: "LLM in the call, 1 s deadline", LLM: true, Deadline: time.Second},
		{Name: "LLM in background jobs, 1 s deadline", LLM: true, Background: true, Deadline: time.Second},
	}
}

// SummaryResult is one mode's replay of the corpus.
type SummaryResult struct {
	Mode           string
	Calls          int
	P50, P99, Max  time.Duration // of PrepareContext
	Summaries      int           // compactions applied that summarized
	LLMSummaries   int           // of which the LLM wrote the summary
	LLMCalls       int64         // summaries the LLM was asked for
	OverheadTokens int64         // what those calls cost (the ledger's overhead input + output)
	Invalid        int
	Failed         int // calls that answered an error (the agent sends the same again)
	// Input and Prefix are the agent's request tokens and those a prefix
	// cache served (as in Result).
	Input, Prefix int64
	// Jobs counts background jobs by outcome.
	Jobs map[string]float64
	// After sums the used share of the usable window right after each
	// compaction, Before right before it (AfterN of each).
	After, Before float64
	AfterN        int
}

// Anthropic is the agent's bill in units of uncached input tokens (as
// Result.Anthropic).
func (r SummaryResult) Anthropic() float64 {
	return AnthropicRead*float64(r.Prefix) + AnthropicWrite*float64(r.Input-r.Prefix)
}

// LLMShare is the share of summaries the LLM wrote.
func (r SummaryResult) LLMShare() float64 {
	return ratio(float64(r.LLMSummaries), float64(r.Summaries))
}

// llmMarker is in every summary the fake LLM writes.
const llmMarker = "(fake LLM summary)"

// fakeLLM answers OpenAI chat completions after a delay: a summary, or a
// judge's question from the context it is given (fakeAnswer).
type fakeLLM struct {
	delay time.Duration
	calls atomic.Int64
}

func (f *fakeLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	select {
	case <-time.After(f.delay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if answer, ok := fakeAnswer(body); ok {
		writeCompletion(w, answer, int64(len(body)/4), int64((len(answer)+3)/4))
		return
	}
	writeCompletion(w, "## Original task\n"+llmMarker+"\n## Completed work\n- steps so far\n## Current state\nworking\n## Pending work\n- go on", 2000, 300)
}

// RunSummaryModes replays every file at window under every mode: all
// transcripts at once against one embedded store (one server), each as its
// own tenant, as an agent loop whose model takes `turn` to answer; the fake
// LLM summarizer answers after llmDelay.
func RunSummaryModes(ctx context.Context, files []string, window int64, llmDelay, turn time.Duration, modes []SummaryMode, tmp string) ([]SummaryResult, error) {
	models, encodings, loaded, err := setup(files, []int64{window})
	if err != nil {
		return nil, err
	}
	var out []SummaryResult
	for _, mode := range modes {
		llm := &fakeLLM{delay: llmDelay}
		srv := httptest.NewServer(llm)
		spec := "extractive"
		if mode.LLM {
			spec = "openai:gpt-4o-mini"
		}
		set, err := summarize.NewSet(spec, map[string]summarize.Endpoint{summarize.ProviderOpenAI: {
			BaseURL: srv.URL + "/v1/", APIKey: "bench", Timeout: 30 * time.Second}})
		if err != nil {
			srv.Close()
			return nil, err
		}
		dir, err := os.MkdirTemp(tmp, "summarybench-")
		if err != nil {
			srv.Close()
			return nil, err
		}
		st, err := sqlite.Open(ctx, dir)
		if err != nil {
			srv.Close()
			return nil, err
		}
		bg := engine.DefaultBackground
		bg.Enabled = mode.Background
		reg := prometheus.NewRegistry()
		e := engine.New(encodings, models, st, engine.WithSummarizers(set), engine.WithBackground(bg),
			engine.WithMetrics(telemetry.NewMetrics(reg, func() float64 { return 0 })))
		jctx, stop := context.WithCancel(ctx)
		jobs := make(chan struct{})
		go func() { defer close(jobs); e.RunJobs(jctx) }()
		res := SummaryResult{Mode: mode.Name}
		var mu sync.Mutex
		var lat []time.Duration
		g, gctx := errgroup.WithContext(ctx)
		for i := range loaded {
			g.Go(func() error {
				r, l, err := replaySummaries(gctx, e, fmt.Sprintf("bench-%d", i), window, mode, turn, loaded[i].system, loaded[i].msgs)
				mu.Lock()
				defer mu.Unlock()
				lat = append(lat, l...)
				res.Calls += r.Calls
				res.Summaries += r.Summaries
				res.LLMSummaries += r.LLMSummaries
				res.OverheadTokens += r.OverheadTokens
				res.Invalid += r.Invalid
				res.Failed += r.Failed
				res.Input += r.Input
				res.After += r.After
				res.Before += r.Before
				res.AfterN += r.AfterN
				res.Prefix += r.Prefix
				return err
			})
		}
		err = g.Wait()
		stop()
		<-jobs
		st.Close()
		srv.Close()
		os.RemoveAll(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mode.Name, err)
		}
		res.LLMCalls = llm.calls.Load()
		res.Jobs = jobOutcomes(reg)
		slices.Sort(lat)
		res.P50, res.P99, res.Max = quantile(lat, 0.50), quantile(lat, 0.99), lat[len(lat)-1]
		out = append(out, res)
	}
	return out, nil
}

// jobOutcomes reads contextd_compaction_jobs_total by outcome.
func jobOutcomes(reg *prometheus.Registry) map[string]float64 {
	out := map[string]float64{}
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() != "contextd_compaction_jobs_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// replaySummaries drives one transcript as an agent loop of one tenant and
// returns its counts and every PrepareContext's latency.
func replaySummaries(ctx context.Context, e *engine.Engine, tenant string, window int64, mode SummaryMode, turn time.Duration, system string, msgs []chat.Message) (SummaryResult, []time.Duration, error) {
	var r SummaryResult
	v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: modelName(window), System: system})
	if err != nil {
		return r, nil, err
	}
	usable := window - compaction.Defaults(window).ReservedOutputTokens
	fixed := v.SystemTokens + v.ToolsTokens + int64(tokens.DefaultFraming.ReplyPriming)
	var prev []string // message ids of the previous request
	var lat []time.Duration
	var pending []chat.Message
	step := func() error {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if mode.Deadline > 0 {
			cctx, cancel = context.WithTimeout(ctx, mode.Deadline)
		}
		start := time.Now()
		res, err := e.PrepareContext(cctx, tenant, v.ID, engine.PrepareInput{Messages: pending})
		lat = append(lat, time.Since(start))
		cancel()
		if err != nil && ctx.Err() == nil {
			r.Failed++ // nothing was changed: the next step sends these again
			return nil
		}
		if err != nil {
			return err
		}
		pending = nil
		r.Calls++
		if res.Status.Compacted && res.Status.LastCompaction != nil {
			r.After += float64(res.Status.Usage.Used) / float64(usable)
			r.Before += float64(res.Status.LastCompaction.TokensBefore) / float64(usable)
			r.AfterN++
		}
		if res.Status.Usage.Used > usable || compaction.ValidatePairs(res.Messages) != nil {
			r.Invalid++
		}
		used, same := fixed, 0
		for i, m := range res.Messages {
			used += m.Tokens
			if i < len(prev) && i == same && prev[i] == m.ID {
				same++
			}
		}
		if len(prev) > 0 {
			r.Prefix += fixed - int64(tokens.DefaultFraming.ReplyPriming)
			for _, m := range res.Messages[:same] {
				r.Prefix += m.Tokens
			}
		}
		r.Input += used
		prev = prev[:0]
		for _, m := range res.Messages {
			prev = append(prev, m.ID)
		}
		select { // the agent's model answers
		case <-time.After(turn):
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	for _, m := range msgs {
		if m.Role == chat.RoleAssistant && len(pending) > 0 {
			if err := step(); err != nil {
				return r, lat, err
			}
		}
		pending = append(pending, m)
	}
	if err := step(); err != nil {
		return r, lat, err
	}
	for token := ""; ; {
		page, err := e.ListCompactions(ctx, tenant, v.ID, engine.Page{Token: token})
		if err != nil {
			return r, lat, err
		}
		for _, c := range page.Compactions {
			if slices.Contains(c.Tiers, string(compaction.TierSummarize)) {
				r.Summaries++
				if strings.Contains(c.Summary, llmMarker) {
					r.LLMSummaries++
				}
			}
		}
		if token = page.Next; token == "" {
			break
		}
	}
	led, err := e.GetSession(ctx, tenant, v.ID)
	if err == nil && led.Ledger != nil {
		r.OverheadTokens = led.Ledger.Overhead.Input + led.Ledger.Overhead.Output
	}
	return r, lat, nil
}

// PrintSummaryModes writes the comparison as a table.
func PrintSummaryModes(w io.Writer, results []SummaryResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "summaries\tcalls\tPrepareContext p50\tp99\tmax\tp99 / extractive p99\tsummaries applied\tby the LLM\tLLM calls\tsummarizer tokens\tjobs applied / discarded\tcompactions: mean use before → after\tagent's input\tcache hit\tagent's bill (Anthropic units)\tfailed calls\tinvalid views")
	var base time.Duration
	for _, r := range results {
		if base == 0 {
			base = r.P99
		}
		jobs := "-"
		if r.Jobs["queued"] > 0 {
			jobs = fmt.Sprintf("%.0f / %.0f", r.Jobs["applied"], r.Jobs["discarded"])
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%.1f×\t%d\t%.0f%%\t%d\t%d\t%s\t%.0f%% → %.0f%%\t%d\t%.1f%%\t%.0f\t%d\t%d\n", r.Mode, r.Calls, ms(r.P50), ms(r.P99), ms(r.Max),
			float64(r.P99)/float64(max(base, 1)), r.Summaries, 100*r.LLMShare(), r.LLMCalls, r.OverheadTokens, jobs, 100*ratio(r.Before, float64(r.AfterN)), 100*ratio(r.After, float64(r.AfterN)), r.Input, 100*ratio(float64(r.Prefix), float64(r.Input)), r.Anthropic(), r.Failed, r.Invalid)
	}
	_ = tw.Flush()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
