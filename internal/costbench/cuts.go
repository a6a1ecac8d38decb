package costbench

import (
	"fmt"
	"regexp"
	"strings"
)

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
			if w == "" || !word(w[len(w)-1]) {
				continue
			}
			if !whole(w, func(byte) bool { return true }, notWord) {
				out = append(out, fmt.Sprintf("the word %q before an ellipsis (line %q)", w, line))
				continue
			}
			// A cut word may be whole elsewhere ("sub" of "subtracted"):
			// with the word before it, it must be whole where it was cut.
			if len(fields) >= 2 && phraseCut(fields[len(fields)-2], w, originals) {
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

// phraseCut reports whether prev followed by w (whitespace between) occurs
// in originals only with a word character after w: w is what remains of a
// longer word. A prev that is a bullet or a trail tag ("-", "ran:") is the
// summary's own, not the originals', and says nothing.
func phraseCut(prev, w, originals string) bool {
	if prev == "-" || strings.HasSuffix(prev, ":") || !strings.Contains(originals, prev) {
		return false
	}
	re, err := regexp.Compile(regexp.QuoteMeta(prev) + `\s+` + regexp.QuoteMeta(w) + `(\w?)`)
	if err != nil {
		return false
	}
	found := false
	for _, m := range re.FindAllStringSubmatch(originals, -1) {
		if m[1] == "" {
			return false
		}
		found = true
	}
	return found
}
