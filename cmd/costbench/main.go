// Command costbench replays the transcripts of testdata/corpus/dev through
// PrepareContext at 16k and 32k windows (-windows for others) and prints, per compaction strategy,
// input tokens, prefix-cache hit rate, billed units under Anthropic and
// OpenAI cache pricing, fact retention and invalid views (`make bench-cost`).
// With -summaries it compares instead how summaries are written (extractive,
// an LLM awaited in the call, an LLM in background jobs): PrepareContext
// latency, the share of summaries the LLM wrote and what it cost
// (`make bench-background`). With -recall it scores, per strategy, the
// probes (internal/probes) after every compaction: in view, one expand
// away, or lost, and checks that no summary cut a word, an identifier or a
// path (exit status 1 if one did) (`make bench-recall`; -strategies for a
// subset). With -recall -judge it also asks a sample of the probes (at most
// -judge-sample per compaction) as questions of the LLM configured as the
// server's summarizer (CONTEXTD_SUMMARIZER=openai:MODEL or anthropic:MODEL
// with its CONTEXTD_*_BASE_URL and API key) over the view sent, and scores
// the answers against the originals; -judge-fake asks the bench's fake LLM
// (`make bench-recall JUDGE=1`, `JUDGE=fake`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/costbench"
)

func main() {
	corpus := flag.String("corpus", "testdata/corpus/dev", "directory of .jsonl transcripts")
	windowList := flag.String("windows", "16384,32768", "comma-separated context windows, in tokens")
	summaries := flag.Bool("summaries", false, "compare summary modes (background compaction) instead of strategies")
	recall := flag.Bool("recall", false, "score what the agent can still answer after each compaction (probes), per strategy")
	only := flag.String("strategies", "", "with -recall: comma-separated words; only the strategies whose name contains one (e.g. extractive,masking)")
	judge := flag.Bool("judge", false, "with -recall: ask sampled probes as questions of the configured LLM summarizer's model (CONTEXTD_SUMMARIZER, CONTEXTD_OPENAI_*/CONTEXTD_ANTHROPIC_*) over the view after each compaction")
	judgeFake := flag.Bool("judge-fake", false, "with -recall -judge: ask the bench's fake LLM instead")
	judgeSample := flag.Int("judge-sample", costbench.DefaultJudgeSample, "with -judge: most probes asked per compaction")
	llmDelay := flag.Duration("llm-delay", 2*time.Second, "with -summaries: how long the fake LLM summarizer takes")
	turn := flag.Duration("turn", time.Second, "with -summaries: how long the agent's own model takes between calls")
	flag.Parse()
	if (*judge || *judgeFake) && !*recall {
		fmt.Fprintln(os.Stderr, "costbench: -judge and -judge-fake need -recall")
		os.Exit(2)
	}
	var windows []int64
	for _, w := range strings.Split(*windowList, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(w), 10, 64)
		if err != nil || n < 1024 {
			fmt.Fprintf(os.Stderr, "costbench: -windows: %q is not a window of 1024 tokens or more\n", w)
			os.Exit(2)
		}
		windows = append(windows, n)
	}
	files, err := filepath.Glob(filepath.Join(*corpus, "*.jsonl"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no transcripts in %s", *corpus)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "costbench:", err)
		os.Exit(1)
	}
	if *summaries {
		fmt.Printf("%d transcripts of %s at %d tokens, all at once (a tenant each); LLM summaries take %s, the agent's model %s a turn\n\n",
			len(files), *corpus, windows[0], *llmDelay, *turn)
		rs, err := costbench.RunSummaryModes(context.Background(), files, windows[0], *llmDelay, *turn, costbench.SummaryModes(), os.TempDir())
		if err != nil {
			fmt.Fprintln(os.Stderr, "costbench:", err)
			os.Exit(1)
		}
		costbench.PrintSummaryModes(os.Stdout, rs)
		return
	}
	if *recall {
		var strategies []costbench.RecallStrategy
		for _, s := range costbench.RecallStrategies() {
			if *only == "" || slices.ContainsFunc(strings.Split(*only, ","), func(w string) bool { return strings.Contains(s.Name, strings.TrimSpace(w)) }) {
				strategies = append(strategies, s)
			}
		}
		if len(strategies) == 0 {
			fmt.Fprintf(os.Stderr, "costbench: -strategies: %q names none of the strategies\n", *only)
			os.Exit(2)
		}
		j, err := newJudge(*judge, *judgeFake, *judgeSample)
		if err != nil {
			fmt.Fprintln(os.Stderr, "costbench:", err)
			os.Exit(2)
		}
		rs, err := costbench.RunRecall(context.Background(), files, windows, strategies, os.TempDir(), j)
		if err != nil {
			fmt.Fprintln(os.Stderr, "costbench:", err)
			os.Exit(1)
		}
		fmt.Printf("%d transcripts of %s; probes scored after every compaction\n\n", len(files), *corpus)
		costbench.PrintRecall(os.Stdout, rs)
		costbench.PrintMisses(os.Stdout, rs)
		costbench.PrintMissesByFile(os.Stdout, rs)
		if j != nil {
			model := j.Spec
			if j.Fake {
				model = "the bench's fake LLM"
			}
			costbench.PrintJudge(os.Stdout, rs, model)
		}
		for _, r := range rs {
			if len(r.Cuts) > 0 {
				os.Exit(1) // a summary cut a word, an identifier or a path (printed above)
			}
		}
		return
	}
	results, err := costbench.Run(context.Background(), files, windows, costbench.Strategies(), os.TempDir())
	if err != nil {
		fmt.Fprintln(os.Stderr, "costbench:", err)
		os.Exit(1)
	}
	fmt.Printf("%d transcripts of %s; previous request fully cached, the next hits the common prefix\n\n", len(files), *corpus)
	costbench.Print(os.Stdout, results)
}

// newJudge returns the judge the flags ask for (nil: none), its model the
// server's configured LLM summarizer (the settings of internal/app), or the
// fake's.
func newJudge(on, fake bool, sample int) (*costbench.Judge, error) {
	if !on {
		if fake {
			return nil, fmt.Errorf("-judge-fake needs -judge")
		}
		return nil, nil
	}
	if sample < 1 {
		return nil, fmt.Errorf("-judge-sample: %d is not a number of probes (1 or more)", sample)
	}
	j := &costbench.Judge{Fake: fake, Sample: sample}
	if !fake {
		cfg, err := app.ParseConfig(nil, app.LookupEnv)
		if err != nil {
			return nil, err
		}
		j.Spec, j.Endpoints = cfg.Summarizer, app.SummarizerEndpoints(cfg)
	}
	return j, j.Check()
}
