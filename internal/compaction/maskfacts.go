package compaction

import (
	"strings"

	"github.com/contextd/contextd/internal/probes"
)

// maxKeptErrors bounds the error lines a placeholder keeps of what it
// prunes (each at most probes.MaxHead bytes), and its URLs likewise.
const maxKeptErrors = 3

// keptFacts is what a placeholder keeps of the output it prunes, so masking
// keeps the artifact (the summary's trail, reading the placeholder later,
// finds it too): a line "exit code N" when status says and the output
// prints one, the first lines of its errors and its first URLs
// (probes.Facts), each on a line of its own; "" when there are none.
func keptFacts(content string, isErr, status bool) string {
	code, errs, urls := probes.Facts(content, isErr, maxKeptErrors)
	var b strings.Builder
	if status && code != "" {
		b.WriteString("\nexit code " + code)
	}
	for _, e := range append(errs, urls...) {
		b.WriteString("\n" + e)
	}
	return b.String()
}
