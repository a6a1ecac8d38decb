package costbench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/probes"
	"github.com/contextd/contextd/internal/summarize"
)

// ErrNoJudgeModel is a judge asked for without an LLM to ask.
var ErrNoJudgeModel = errors.New("the judge needs an LLM")

// DefaultJudgeSample is how many probes the judge asks after each
// compaction (at most: fewer when fewer can be asked).
const DefaultJudgeSample = 8

// judgeAnswerTokens bounds each answer.
const judgeAnswerTokens = 256

// judgeAnswerBytes is the longest answer scored, twice what the cap's
// tokens hold at the usual 4 bytes a token: a longer one (or one billed
// more output tokens than the cap) came from a provider that ignored the
// cap, and is judged wrong, since an answer that dumps the context it was
// given would hold every probe in view.
const judgeAnswerBytes = 8 * judgeAnswerTokens

// Judge asks sampled probes as questions of a model over the view actually
// sent after each compaction (Factory's probe evaluation) and scores each
// answer against the original, deterministically (judgeCorrect).
type Judge struct {
	// Spec is the model asked, "openai:MODEL" or "anthropic:MODEL", at
	// Endpoints (the server's CONTEXTD_OPENAI_* / CONTEXTD_ANTHROPIC_*
	// settings, app.SummarizerEndpoints).
	Spec      string
	Endpoints map[string]summarize.Endpoint
	// Fake asks the bench's fake LLM instead (fakeLLM: it answers with the
	// line of the context that best matches the question's quoted hint).
	Fake bool
	// Sample is the most probes asked per compaction (0: DefaultJudgeSample).
	Sample int
	// keep records every verdict in the results (tests).
	keep bool
}

// Check reports a judge that has no LLM to ask (ErrNoJudgeModel).
func (j *Judge) Check() error {
	if j.Fake {
		return nil
	}
	provider, model, ok := strings.Cut(j.Spec, ":")
	if !ok || model == "" {
		return fmt.Errorf("%w: the summarizer is %q; set CONTEXTD_SUMMARIZER=openai:MODEL or anthropic:MODEL (or -judge-fake)", ErrNoJudgeModel, j.Spec)
	}
	if _, configured := j.Endpoints[provider]; !configured {
		return fmt.Errorf("%w: provider %q of %q has no base URL or API key (CONTEXTD_%s_BASE_URL, CONTEXTD_%s_API_KEY)", ErrNoJudgeModel, provider, j.Spec,
			strings.ToUpper(provider), strings.ToUpper(provider))
	}
	return nil
}

// asker returns the model's client, the fake's at fakeURL when j.Fake.
func (j *Judge) asker(fakeURL string) (summarize.Asker, error) {
	if err := j.Check(); err != nil {
		return nil, err
	}
	spec, eps := j.Spec, j.Endpoints
	if j.Fake {
		spec, eps = "openai:fake-judge", map[string]summarize.Endpoint{summarize.ProviderOpenAI: {BaseURL: fakeURL, APIKey: "bench"}}
	}
	set, err := summarize.NewSet(spec, eps)
	if err != nil {
		return nil, err
	}
	s, _, err := set.Get(spec)
	if err != nil {
		return nil, err
	}
	a, ok := s.(summarize.Asker)
	if !ok {
		return nil, fmt.Errorf("%w: %q cannot be asked questions", ErrNoJudgeModel, spec)
	}
	return a, nil
}

func (j *Judge) sample() int {
	if j.Sample > 0 {
		return j.Sample
	}
	return DefaultJudgeSample
}

// Factory's probe types, as the judge reports them.
const (
	TypeRecall       = "recall"       // errors, tests: "what was the exact error when …"
	TypeArtifact     = "artifact"     // files, commands, URLs: "which files were edited, what did command X return"
	TypeContinuation = "continuation" // the last edits, the failing tests: "what is the next step"
	TypeDecision     = "decision"     // what the user asked, standing instructions: "what was decided about …"
)

var judgeTypes = []string{TypeRecall, TypeArtifact, TypeContinuation, TypeDecision}

func judgeType(k probes.Kind) string {
	switch k {
	case probes.Error, probes.Test:
		return TypeRecall
	case probes.LastEdit, probes.FailingTest:
		return TypeContinuation
	case probes.User, probes.Standing:
		return TypeDecision
	}
	return TypeArtifact
}

// JudgeStats sums one strategy's judged probes and what asking them cost
// (kept out of the strategy's own bill).
type JudgeStats struct {
	Asked, Correct int
	// InView counts the asked probes that were in view (the bench's own
	// score), InViewCorrect those of them judged correct.
	InView, InViewCorrect int
	ByType                map[string]*[2]int // type → asked, correct
	Calls                 int
	Input, Output         int64 // tokens the judge's calls were billed (Input includes cached reads)
	Verdicts              []Verdict
}

// Verdict is one judged probe.
type Verdict struct {
	Probe            probes.Probe
	Type             string
	Question, Answer string
	InView, Correct  bool
}

func (s *JudgeStats) merge(o JudgeStats) {
	s.Asked += o.Asked
	s.Correct += o.Correct
	s.InView += o.InView
	s.InViewCorrect += o.InViewCorrect
	s.Calls += o.Calls
	s.Input += o.Input
	s.Output += o.Output
	s.Verdicts = append(s.Verdicts, o.Verdicts...)
	for t, v := range o.ByType {
		s.typ(t)[0] += v[0]
		s.typ(t)[1] += v[1]
	}
}

func (s *JudgeStats) typ(t string) *[2]int {
	if s.ByType == nil {
		s.ByType = map[string]*[2]int{}
	}
	if s.ByType[t] == nil {
		s.ByType[t] = &[2]int{}
	}
	return s.ByType[t]
}

// judgeSystem is the judge's system prompt; the fake recognizes it.
const judgeSystem = "You answer questions about an AI agent's conversation using only the context given: what the agent's model is sent. " +
	"Quote the exact text from the context (a path, a command, an error line, a test, what the user wrote). " +
	"If the context does not hold the answer, answer \"not in context\"."

// question phrases a probe as Factory's probe types ask it, quoting a hint
// that names it without giving its answer (hintOf), and the text a correct
// answer holds; ok is false when the probe cannot be asked that way.
func question(p probes.Probe) (q, want string, ok bool) {
	if len(p.Needles) == 0 {
		return "", "", false
	}
	want = answerLine(p)
	hint, ends := hintOf(want)
	if hint == "" {
		return "", "", false
	}
	where := "begins «" + hint + "»"
	if ends {
		where = "ends «" + hint + "»"
	}
	format, ok := questions[p.Kind]
	if !ok {
		return "", "", false
	}
	return fmt.Sprintf(format, where), want, true
}

// questions are the judge's questions by kind: %s is where the hint is.
var questions = map[probes.Kind]string{
	probes.Error:       "What was the exact error the agent saw, the line that %s? Quote the whole line.",
	probes.Test:        "Which test did the agent run, the one whose name %s? Give its full name and whether it passed.",
	probes.File:        "Which file did the agent act on whose path %s? Give the full path.",
	probes.Command:     "What exact command did the agent run that %s, and what did it return? Quote the command.",
	probes.URL:         "Which URL did the agent use that %s? Quote it.",
	probes.LastEdit:    "Which file was the agent last editing, the one whose path %s, and what is the next step with it? Give the full path.",
	probes.FailingTest: "Which test is still failing, the one whose name %s, and what is the next step? Give its full name.",
	probes.User:        "What did the user ask in their message that %s? Quote its first line.",
	probes.Standing:    "What do the standing instructions say in their line that %s? Quote the line.",
}

// answerLine is the text a correct answer holds: the first line of the
// probe's answer (probes.Head: at most probes.MaxHead bytes); for a
// message (what the user asked, standing instructions) its first line of
// three words or more, as a tag (<pr_description>) opens many.
func answerLine(p probes.Probe) string {
	text := p.Needles[0]
	if p.Kind == probes.User || p.Kind == probes.Standing {
		for line := range strings.Lines(text) {
			if len(strings.Fields(line)) >= 3 {
				text = line
				break
			}
		}
	}
	head, _ := probes.Head(text)
	return head
}

// hintOf returns what a question quotes of its answer: the first two
// thirds of its words (at least one word withheld), or, for one word that
// is a path, what follows its last slash (ends: the answer ends with it).
// A single word that is no path, a hint of fewer than minHint bytes (a
// bare "cat" names no command) or one holding a quote mark (« ») has no
// hint.
func hintOf(want string) (hint string, ends bool) {
	words := strings.Fields(want)
	switch {
	case len(words) >= 2:
		k := max(1, min(2*len(words)/3, len(words)-1))
		hint = strings.Join(words[:k], " ")
	case len(words) == 1:
		if i := strings.LastIndexByte(want, '/'); i >= 0 && i+1 < len(want) {
			hint, ends = want[i+1:], true
		}
	}
	if len(hint) < minHint || strings.ContainsAny(hint, "«»") {
		return "", false
	}
	return hint, ends
}

// minHint is the shortest hint a question quotes, in bytes.
const minHint = 6

// judgeCorrect is the scoring rule: the answer holds the probe's answer
// text (its first line, at most probes.MaxHead bytes) verbatim, runs of
// white space counting as one space (and, judgeView, it is within the cap:
// judgeAnswerBytes).
func judgeCorrect(answer, want string) bool {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	return want != "" && strings.Contains(norm(answer), norm(want))
}

// pick returns the probes asked after a compaction: up to n, taken in turn
// from each of Factory's types, within a type in the order of a hash of
// the probe's kind and answer (the same probe is picked whatever the
// strategy), only probes that can be asked (question) and whose hint names
// no other probe of their kind. Work: linear in the probes' words.
func pick(ps []probes.Probe, n int) (picked []int) {
	byType := map[string][]int{}
	hash := func(p probes.Probe) uint32 {
		h := fnv.New32a()
		h.Write([]byte(string(p.Kind) + "\x00" + p.Needles[0]))
		return h.Sum32()
	}
	// A question is asked only when its hint names one answer: no other
	// probe of its kind begins (or ends) with it.
	type key struct {
		k    probes.Kind
		hint string
		ends bool
	}
	seen := map[key]int{}
	for _, p := range ps {
		if len(p.Needles) == 0 {
			continue
		}
		want := answerLine(p)
		words := strings.Fields(want)
		for k := 1; k <= len(words); k++ {
			seen[key{p.Kind, strings.Join(words[:k], " "), false}]++
		}
		if hint, ends := hintOf(want); ends {
			seen[key{p.Kind, hint, true}]++
		}
	}
	for i, p := range ps {
		if _, want, ok := question(p); ok {
			if hint, ends := hintOf(want); seen[key{p.Kind, hint, ends}] == 1 {
				byType[judgeType(p.Kind)] = append(byType[judgeType(p.Kind)], i)
			}
		}
	}
	for _, t := range judgeTypes {
		slices.SortStableFunc(byType[t], func(a, b int) int {
			ha, hb := hash(ps[a]), hash(ps[b])
			switch {
			case ha < hb:
				return -1
			case ha > hb:
				return 1
			}
			return 0
		})
	}
	for round := 0; len(picked) < n; round++ {
		added := false
		for _, t := range judgeTypes {
			if round < len(byType[t]) && len(picked) < n {
				picked = append(picked, byType[t][round])
				added = true
			}
		}
		if !added {
			break
		}
	}
	return picked
}

// renderContext is the view as the judge is given it: the system prompt
// and every message sent, each under its role.
func renderContext(system string, view []chat.Message) string {
	var b strings.Builder
	b.WriteString("[system]\n" + system + "\n")
	for i := range view {
		b.WriteString("\n[" + string(view[i].Role) + "]\n" + renderMessage(&view[i]))
	}
	return b.String()
}

// judgePrompt is the user message of one question.
func judgePrompt(context, q string) string {
	return "<context>\n" + context + "\n</context>\n\nQuestion: " + q
}

// judgeView asks the sampled probes of one compaction over the view and
// adds the verdicts to r.Judge. Work: at most Sample calls, each sending
// the view once.
func (j *Judge) judgeView(ctx context.Context, a summarize.Asker, system string, view []chat.Message, ps []probes.Probe, status []Recall, r *RecallResult) error {
	text := renderContext(system, view)
	for _, i := range pick(ps, j.sample()) {
		p := ps[i]
		q, want, _ := question(p)
		answer, u, err := a.Ask(ctx, judgeSystem, judgePrompt(text, q), judgeAnswerTokens)
		if err != nil {
			return fmt.Errorf("judge: %w", err)
		}
		s := &r.Judge
		s.Calls++
		s.Input += u.Input + u.CacheRead + u.CacheWrite
		s.Output += u.Output
		withinCap := u.Output <= judgeAnswerTokens && len(answer) <= judgeAnswerBytes
		v := Verdict{Probe: p, Type: judgeType(p.Kind), Question: q, Answer: answer, InView: status[i].InView == 1,
			Correct: withinCap && judgeCorrect(answer, want)}
		s.Asked++
		s.typ(v.Type)[0]++
		if v.Correct {
			s.Correct++
			s.typ(v.Type)[1]++
		}
		if v.InView {
			s.InView++
			if v.Correct {
				s.InViewCorrect++
			}
		}
		if j.keep {
			s.Verdicts = append(s.Verdicts, v)
		}
	}
	return nil
}

// PrintJudge writes the judged accuracy beside the bench's own recall of
// the same strategies, and the judge's calls and tokens (not in the
// strategies' bills).
func PrintJudge(w io.Writer, results []RecallResult, model string) {
	pct := func(a, b int) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f %%", 100*float64(a)/float64(b))
	}
	fmt.Fprintf(w, "\nJudge (%s): sampled probes asked over the view after each compaction\n\n", model)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| window\t strategy\t recall in view (all probes)\t within one expand\t asked\t of them in view\t judged correct\t correct when in view\t recall\t artifact\t continuation\t decision\t judge calls\t judge input tokens\t judge output tokens\t")
	fmt.Fprintln(tw, "|---\t---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
	var calls int
	var in, out int64
	for _, r := range results {
		a, s := r.All(), r.Judge
		byType := func(t string) string {
			if v := s.ByType[t]; v != nil {
				return fmt.Sprintf("%s (%d)", pct(v[1], v[0]), v[0])
			}
			return "-"
		}
		fmt.Fprintf(tw, "| %dk\t %s\t %.1f %%\t %.1f %%\t %d\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %d\t %d\t %d\t\n", r.Window/1024, r.Strategy,
			100*a.ViewShare(), 100*a.ExpandShare(), s.Asked, pct(s.InView, s.Asked), pct(s.Correct, s.Asked), pct(s.InViewCorrect, s.InView),
			byType(TypeRecall), byType(TypeArtifact), byType(TypeContinuation), byType(TypeDecision), s.Calls, s.Input, s.Output)
		calls, in, out = calls+s.Calls, in+s.Input, out+s.Output
	}
	tw.Flush()
	fmt.Fprintf(w, "\nThe judge made %d calls: %d input and %d output tokens (not in the strategies' input tokens or units above).\n", calls, in, out)
}
