package costbench

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/summarize"
)

// TestJudgeTracksTheView runs the judge against the fake LLM (a real HTTP
// server speaking OpenAI's wire format, answering from the context it is
// sent) on one transcript at 8k where probes leave the view (sqlfluff-1517,
// the corpus's largest trail: sqlfluff-1763's 7 to 12 of 836 commands
// left it too seldom for 16 questions a compaction to be sure to ask one),
// masking
// and extractive summary, 16 questions a compaction: a probe
// in view is judged correct, one compacted out of view is judged wrong, the
// fake answers within the cap as a model must, and the judge's calls and
// tokens are counted apart from the strategy's bill (the same replays
// without the judge bill and score the same).
func TestJudgeTracksTheView(t *testing.T) {
	var files []string
	for _, f := range corpus(t) {
		if strings.Contains(f, "sqlfluff-1517") {
			files = append(files, f)
		}
	}
	var strategies []RecallStrategy
	for _, s := range RecallStrategies() {
		if strings.Contains(s.Name, "masking") || strings.Contains(s.Name, "extractive") {
			strategies = append(strategies, s)
		}
	}
	j := &Judge{Fake: true, Sample: 16, keep: true}
	rs, err := RunRecall(t.Context(), files, []int64{8192}, strategies, t.TempDir(), j)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	PrintJudge(&b, rs, "fake")
	t.Logf("\n%s", b.String())
	var inViewCorrect, lostWrong *Verdict
	for _, r := range rs {
		s := r.Judge
		if s.Asked == 0 || s.Calls != s.Asked || s.Input == 0 || s.Asked > j.sample()*r.Compactions {
			t.Errorf("%s: %d asked in %d calls (%d input tokens) over %d compactions", r.Strategy, s.Asked, s.Calls, s.Input, r.Compactions)
		}
		for i := range s.Verdicts {
			v := &s.Verdicts[i]
			if v.InView && v.Correct && inViewCorrect == nil {
				inViewCorrect = v
			}
			if !v.InView && !v.Correct && lostWrong == nil {
				lostWrong = v
			}
			if !v.InView && v.Correct {
				t.Errorf("%s: judged correct out of view: %q → %q", r.Strategy, v.Question, v.Answer)
			}
			if len(v.Answer) > 4*judgeAnswerTokens {
				t.Errorf("%s: the fake answered %d bytes, more than a model holds in %d tokens: %q", r.Strategy, len(v.Answer), judgeAnswerTokens, v.Question)
			}
		}
	}
	// The same replays without the judge: the strategies' calls, bills and
	// recall are the judge's business in no way.
	plain, err := RunRecall(t.Context(), files, []int64{8192}, strategies, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		p := plain[i]
		if r.Calls != p.Calls || r.Compactions != p.Compactions || r.Input != p.Input || r.Prefix != p.Prefix || r.All() != p.All() {
			t.Errorf("%s with the judge: %d calls, %d compactions, %d input (%d prefix), %+v; without: %d, %d, %d (%d), %+v", r.Strategy,
				r.Calls, r.Compactions, r.Input, r.Prefix, r.All(), p.Calls, p.Compactions, p.Input, p.Prefix, p.All())
		}
	}
	if inViewCorrect == nil || lostWrong == nil {
		t.Fatalf("want a probe in view judged correct and one out of view judged wrong; got %v and %v", inViewCorrect, lostWrong)
	}
	t.Logf("in view, correct: %q → %q", inViewCorrect.Question, inViewCorrect.Answer)
	t.Logf("out of view, wrong: %q → %q", lostWrong.Question, lostWrong.Answer)
}

// TestJudgeNeedsAnLLM: a judge without an LLM configured (the extractive
// summarizer, or a provider without an endpoint) is refused, before any
// replay, with ErrNoJudgeModel.
func TestJudgeNeedsAnLLM(t *testing.T) {
	for _, j := range []*Judge{
		{Spec: "extractive"},
		{Spec: ""},
		{Spec: "openai:gpt-4o-mini"},
		{Spec: "anthropic:claude", Endpoints: map[string]summarize.Endpoint{summarize.ProviderOpenAI: {BaseURL: "http://localhost:1/v1/"}}},
	} {
		t.Run(j.Spec, func(t *testing.T) {
			_, err := RunRecall(t.Context(), corpus(t)[:1], []int64{16_384}, RecallStrategies()[:1], t.TempDir(), j)
			if !errors.Is(err, ErrNoJudgeModel) {
				t.Errorf("judge %q: err = %v, want ErrNoJudgeModel", j.Spec, err)
			}
		})
	}
}

// TestJudgeScoringRule: verbatim (white space aside), never a part.
func TestJudgeScoringRule(t *testing.T) {
	for _, c := range []struct {
		answer, want string
		ok           bool
	}{
		{"The error was: TypeError: bad operand  type", "TypeError: bad operand type", true},
		{"TypeError: bad operand", "TypeError: bad operand type", false},
		{"not in context", "/testbed/src/calc.py", false},
		{"It edited /testbed/src/calc.py", "/testbed/src/calc.py", true},
	} {
		if got := judgeCorrect(c.answer, c.want); got != c.ok {
			t.Errorf("judgeCorrect(%q, %q) = %v", c.answer, c.want, got)
		}
	}
	for want, hint := range map[string]string{"/testbed/src/calc.py": "calc.py", "python reproduce.py --fast": "python reproduce.py", "ls -la": "", "cat foo.py": "", "done": ""} {
		if got, _ := hintOf(want); got != hint {
			t.Errorf("hintOf(%q) = %q, want %q", want, got, hint)
		}
	}
}

// TestJudgeRejectsADumpedContext: a provider that ignores the answer cap
// and answers with the whole prompt it was sent (so every probe in view is
// in the answer) scores nothing, whether it bills its output honestly (more
// tokens than the cap) or not (more bytes than the cap's tokens hold); nor
// does one that echoes the question. A real HTTP server speaking OpenAI's
// wire format, through the real client.
func TestJudgeRejectsADumpedContext(t *testing.T) {
	var files []string
	for _, f := range corpus(t) {
		if strings.Contains(f, "sqlfluff-1517") {
			files = append(files, f)
		}
	}
	whole := func(prompt string) string { return prompt }
	question := func(prompt string) string { _, q, _ := strings.Cut(prompt, "Question: "); return q }
	for _, c := range []struct {
		name   string
		answer func(prompt string) string
		billed func(answer string) int64
	}{
		{"the prompt, billed", whole, func(answer string) int64 { return int64(len(answer) / 4) }},
		{"the prompt, unbilled", whole, func(string) int64 { return 1 }},
		// The question's hint never gives its answer away.
		{"the question", question, func(answer string) int64 { return int64(len(answer) / 4) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var req struct {
					Messages []struct {
						Content json.RawMessage `json:"content"`
					} `json:"messages"`
				}
				_ = json.Unmarshal(body, &req)
				answer := c.answer(contentText(req.Messages[len(req.Messages)-1].Content))
				w.Header().Set("Content-Type", "application/json")
				writeCompletion(w, answer, int64(len(body)/4), c.billed(answer))
			}))
			defer echo.Close()
			j := &Judge{Spec: "openai:echo", Endpoints: map[string]summarize.Endpoint{summarize.ProviderOpenAI: {BaseURL: echo.URL + "/v1/", APIKey: "k"}}, Sample: 4}
			rs, err := RunRecall(t.Context(), files, []int64{16_384}, RecallStrategies()[:1], t.TempDir(), j)
			if err != nil {
				t.Fatal(err)
			}
			s := rs[0].Judge
			if s.InView == 0 || s.Correct != 0 {
				t.Errorf("echoing %s: %d of %d asked judged correct (%d in view), want none", c.name, s.Correct, s.Asked, s.InView)
			}
		})
	}
}
