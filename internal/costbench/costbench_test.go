package costbench

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func corpus(t *testing.T) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	files, err := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "..", "testdata", "corpus", "dev", "*.jsonl"))
	if err != nil || len(files) < 2 {
		t.Fatalf("corpus transcripts missing: %v", err)
	}
	return files
}

// TestCacheAwareSaves replays every transcript of the corpus at both
// windows and asserts the acceptance properties of cache-aware compaction
// against the default without it: over the corpus at least 10 % fewer
// billed units (Anthropic pricing) and fact retention no lower; on each
// transcript a bill no higher and retention no lower; no invalid view. It
// is `make bench-cost` without the sliding window.
func TestCacheAwareSaves(t *testing.T) {
	strategies := Strategies()[:2]
	windows := []int64{16_384, 32_768}
	files := corpus(t)
	each, err := RunEach(t.Context(), files, windows, strategies, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	total := make([]Result, len(each[0]))
	for i, r := range each[0] {
		total[i] = Result{Strategy: r.Strategy, Window: r.Window}
	}
	for f, results := range each {
		for i := 0; i < len(results); i += 2 {
			old, aware := results[i], results[i+1]
			total[i].add(old)
			total[i+1].add(aware)
			if aware.Anthropic() > old.Anthropic() || aware.Retention() < old.Retention() {
				t.Errorf("%s at %dk: cache-aware bill %.0f, retention %.3f; default %.0f, %.3f",
					filepath.Base(files[f]), old.Window/1024, aware.Anthropic(), aware.Retention(), old.Anthropic(), old.Retention())
			}
		}
	}
	var b testWriter
	Print(&b, total)
	t.Log("\n" + string(b))
	for i := 0; i < len(total); i += 2 {
		old, aware := total[i], total[i+1]
		if old.Compactions == 0 {
			t.Fatalf("%dk: the default never compacted: the comparison proves nothing", old.Window/1024)
		}
		if aware.Anthropic() > 0.9*old.Anthropic() {
			t.Errorf("%dk: cache-aware bill %.0f is not 10%% below the default's %.0f", aware.Window/1024, aware.Anthropic(), old.Anthropic())
		}
		if aware.Retention() < old.Retention() {
			t.Errorf("%dk: fact retention %.3f below the default's %.3f", aware.Window/1024, aware.Retention(), old.Retention())
		}
		if aware.Invalid+old.Invalid > 0 {
			t.Errorf("%dk: invalid views: %d cache-aware, %d default", aware.Window/1024, aware.Invalid, old.Invalid)
		}
	}
}

type testWriter []byte

func (w *testWriter) Write(p []byte) (int, error) { *w = append(*w, p...); return len(p), nil }

// TestSummaryModes runs `make bench-background` small (three transcripts,
// a 20 ms fake LLM, 5 ms turns) for its mechanics, not its figures: every
// mode replays without an invalid view or a failed call, the LLM in the
// call writes every summary, and with background jobs some are scheduled
// and applied.
func TestSummaryModes(t *testing.T) {
	files := corpus(t)[:3]
	modes := SummaryModes()
	for i := range modes {
		modes[i].Deadline = 0 // a loaded CI machine must not fail calls
	}
	rs, err := RunSummaryModes(t.Context(), files, 16_384, 20*time.Millisecond, 5*time.Millisecond, modes, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var b testWriter
	PrintSummaryModes(&b, rs)
	t.Log("\n" + string(b))
	for _, r := range rs {
		if r.Invalid > 0 || r.Failed > 0 || r.Summaries == 0 {
			t.Errorf("%s: %d invalid views, %d failed calls, %d summaries", r.Mode, r.Invalid, r.Failed, r.Summaries)
		}
	}
	if rs[1].LLMShare() != 1 {
		t.Errorf("LLM in the call wrote %.0f%% of the summaries", 100*rs[1].LLMShare())
	}
	if bg := rs[3]; bg.Jobs["queued"] == 0 || bg.Jobs["applied"] == 0 || bg.LLMSummaries == 0 {
		t.Errorf("background jobs: %v, %d LLM summaries", bg.Jobs, bg.LLMSummaries)
	}
}
