package compaction

import (
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/probes"
)

// maxKeptErrors bounds the error lines a placeholder keeps of what it
// prunes (each at most 4 × probes.MaxHead bytes, Head), and its URLs
// likewise (each at most probes.MaxURL bytes; a longer one is left out,
// never cut): at most about 4 KiB of facts per placeholder.
const maxKeptErrors = 3

// maxKeptTests bounds the test lines a placeholder keeps (failing ones
// first; each at most probes.MaxURL bytes, a longer one left out): one
// pytest run of a module names a few dozen at most; a whole suite's names
// are one expand away. With them a placeholder keeps at most about 10 KiB
// of facts.
const maxKeptTests = 20

// keptFacts is what a placeholder keeps of the output it prunes, so masking
// keeps the artifact (the summary's trail, reading the placeholder later,
// finds it too): a line "exit code N" when status says and the output
// prints one, the first lines of its errors and its first URLs
// (probes.Facts), the lines naming a test and its result (probes.TestLines),
// each on a line of its own; "" when there are none.
func keptFacts(content string, isErr, status bool) string {
	code, errs, urls := probes.Facts(content, isErr, maxKeptErrors)
	var b strings.Builder
	if status && code != "" {
		b.WriteString("\nexit code " + code)
	}
	for _, e := range append(append(errs, probes.TestLines(content, maxKeptTests)...), urls...) {
		b.WriteString("\n" + e)
	}
	return b.String()
}

// masked returns the stand-in build makes of m with the facts it keeps,
// unless that takes as many tokens as m (an output made of little but error
// lines and URLs): then the one without them. Masking never grows the view.
// The stand-in with its facts comes counted (Tokens), and replace does not
// count it again.
func (p *planner) masked(m *chat.Message, build func(facts bool) (chat.Message, bool)) (chat.Message, bool) {
	repl, ok := build(true)
	if !ok {
		return repl, false
	}
	if repl.Tokens = p.req.Count(&repl); repl.Tokens >= m.Tokens {
		return build(false)
	}
	return repl, true
}
