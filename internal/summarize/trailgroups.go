package summarize

import "strings"

// maxGroup bounds the lines one trail line groups.
const maxGroup = 20

// groups returns, for each line, the index of the first line of its group:
// a run of lines with one tag that names a file, a test or a URL, and with
// the same facts (the same message, no hash), written as one line whose
// texts are separated by ", " (a test run's passing tests, the URLs of one
// output, the files of one patch). A text holding ", " is never grouped.
func groups(lines []trailLine) []int {
	leader := make([]int, len(lines))
	for i, l := range lines {
		leader[i] = i
		if i == 0 || !groupable(l) {
			continue
		}
		g := leader[i-1]
		if p := lines[i-1]; groupable(p) && p.tag == l.tag && p.meta == l.meta && i-g < maxGroup {
			leader[i] = g
		}
	}
	return leader
}

// groupable reports whether l may share a line with others of its tag.
func groupable(l trailLine) bool {
	return groupTag(l.tag) && !quoted(l) && l.text != ""
}

// groupTag reports whether lines of tag may be grouped (and so a line of
// it is split at groupSep when a chained summary reads it, unless quoted).
func groupTag(tag string) bool {
	switch tag {
	case tagRead, tagCreated, tagEdited, tagDeleted, tagPassed, tagFailed, tagURL:
		return true
	}
	return false
}

// quoted reports whether l's text is written between quotes: a text of a
// groupable tag that holds groupSep (a path "Docs, 2024/a.txt") or starts
// with a quote, so a chained summary reads it back whole, not as a group.
func quoted(l trailLine) bool {
	return groupTag(l.tag) && (strings.Contains(l.text, groupSep) || strings.HasPrefix(l.text, quote))
}

// splitGroup returns the texts of a line of a groupable tag as written:
// one unquoted text, or a group's texts.
func splitGroup(text string) []string {
	if len(text) >= 2 && strings.HasPrefix(text, quote) && strings.HasSuffix(text, quote) {
		return []string{text[1 : len(text)-1]}
	}
	return strings.Split(text, groupSep)
}

// groupSep separates the texts of a group's line; quote encloses a text
// that holds it.
const (
	groupSep = ", "
	quote    = `"`
)

// renderGroup renders the group that starts at line g: its lines kept
// (all when kept is nil) as one line, or "" when none is.
func renderGroup(lines []trailLine, leader []int, g int, kept []bool) string {
	var texts []string
	for i := g; i < len(lines) && leader[i] == g; i++ {
		if kept == nil || kept[i] {
			texts = append(texts, lines[i].text)
		}
	}
	switch len(texts) {
	case 0:
		return ""
	case 1:
		return trailLine{tag: lines[g].tag, text: texts[0], meta: lines[g].meta}.render() + "\n"
	}
	return "- " + lines[g].tag + ": " + strings.Join(texts, groupSep) + metaSep + lines[g].meta + "\n"
}
