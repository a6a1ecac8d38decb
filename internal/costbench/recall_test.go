package costbench

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/probes"
)

// TestRecall runs the recall benchmark small (four transcripts, 16k, every
// strategy) for its mechanics, and checks what holds on any transcript:
// probes are scored; what the person typed is in view after every
// compaction under the default policy, with either summarizer; no view is
// invalid; and no summary the replays produced cuts a word, an identifier
// or a path (cutWords).
func TestRecall(t *testing.T) {
	var files []string
	for _, f := range corpus(t) {
		for _, name := range []string{"django-14752", "astropy-12907", "sympy-20916", "swe-agent-pydicom-1458"} {
			if strings.Contains(f, name) {
				files = append(files, f)
			}
		}
	}
	rs, err := RunRecall(t.Context(), files, []int64{16_384}, RecallStrategies(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	PrintRecall(&b, rs)
	t.Logf("\n%s", b.String())
	_, _, loaded, err := setup(files, []int64{16_384})
	if err != nil {
		t.Fatal(err)
	}
	var originals strings.Builder
	for _, tr := range loaded {
		originals.WriteString(tr.system + "\n")
		for i := range tr.msgs {
			originals.WriteString(renderMessage(&tr.msgs[i]) + "\n")
		}
	}
	summaries := 0
	for _, r := range rs {
		if r.Compactions == 0 || r.All().Seen == 0 || r.Invalid > 0 {
			t.Errorf("%s: %d compactions, %d probes, %d invalid views", r.Strategy, r.Compactions, r.All().Seen, r.Invalid)
		}
		if in := r.ByClass[probes.Instruction]; !r.isDropMiddle() && in != nil && in.InView != in.Seen {
			t.Errorf("%s: %d of %d instruction probes in view, want all", r.Strategy, in.InView, in.Seen)
		}
		for _, s := range r.Summaries {
			summaries++
			for _, cut := range cutWords(s, originals.String()) {
				t.Errorf("%s: a summary cut %s", r.Strategy, cut)
			}
		}
	}
	if summaries == 0 {
		t.Error("the replays produced no summary")
	}
}

func (r RecallResult) isDropMiddle() bool { return r.Strategy == "drop-middle" }

var (
	benchURL  = regexp.MustCompile(`https?://\S+`)
	benchPath = regexp.MustCompile(`(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*\w`)
)

// cutWords returns what a summary cut, judged against the originals it
// came from: a word just before an ellipsis that the originals never have
// whole (followed by a space or punctuation), and a path the originals
// never have with that start (an absolute path that lost its leading slash,
// a path cut at its head).
func cutWords(summary, originals string) []string {
	var out []string
	whole := func(s string, before, after func(byte) bool) bool {
		for from := 0; ; {
			i := strings.Index(originals[from:], s)
			if i < 0 {
				return false
			}
			i += from
			j := i + len(s)
			if (i == 0 || before(originals[i-1])) && (j == len(originals) || after(originals[j])) {
				return true
			}
			from = i + 1
		}
	}
	word := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
	}
	notWord := func(c byte) bool { return !word(c) }
	for _, line := range strings.Split(summary, "\n") {
		for rest := line; ; {
			i := strings.Index(rest, "…")
			if i < 0 {
				break
			}
			fields := strings.Fields(rest[:i])
			rest = rest[i+len("…"):]
			if len(fields) == 0 {
				continue
			}
			w := strings.TrimLeft(fields[len(fields)-1], "([{\"'`")
			if w != "" && word(w[len(w)-1]) && !whole(w, func(byte) bool { return true }, notWord) {
				out = append(out, fmt.Sprintf("the word %q before an ellipsis (line %q)", w, line))
			}
		}
	}
	text := benchURL.ReplaceAllString(summary, " ")
	for _, p := range benchPath.FindAllString(text, -1) {
		if !strings.Contains(p, "/") || strings.HasPrefix(p, "msg_") {
			continue
		}
		pathChar := func(c byte) bool { return word(c) || c == '/' || c == '.' || c == '-' || c == '~' }
		if !whole(p, func(c byte) bool { return !pathChar(c) }, notWord) {
			out = append(out, fmt.Sprintf("the path %q", p))
		}
	}
	return out
}

// TestCutWordsFindsTheKnownCuts: the property's checker finds the two cuts
// the extractive summary used to make.
func TestCutWordsFindsTheKnownCuts(t *testing.T) {
	originals := "The issue is that calc.py subtracted instead of adding.\ncat /testbed/src/calc.py\n"
	for summary, want := range map[string]int{
		"- The issue is that calc.py subtracted instead of adding.\n- /testbed/src/calc.py": 0,
		"- The issue is that calc.py subtr…":                                                1,
		"## Files\n- testbed/src/calc.py":                                                   1,
	} {
		if got := cutWords(summary, originals); len(got) != want {
			t.Errorf("cutWords(%q) = %v, want %d", summary, got, want)
		}
	}
}
