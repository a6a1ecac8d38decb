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
	switch l.tag {
	case tagRead, tagCreated, tagEdited, tagDeleted, tagPassed, tagFailed, tagURL:
		return !strings.Contains(l.text, groupSep) && l.text != ""
	}
	return false
}

// groupSep separates the texts of a group's line.
const groupSep = ", "

// renderGroup renders the group that starts at line g: its lines kept
// (all when kept is nil) as one line, or "" when none is.
func renderGroup(lines []trailLine, leader []int, g int, kept []bool) string {
	var texts []string
	for i := g; i < len(lines) && leader[i] == g; i++ {
		if kept == nil || kept[i] {
			texts = append(texts, lines[i].text)
		}
	}
	if len(texts) == 0 {
		return ""
	}
	return trailLine{tag: lines[g].tag, text: strings.Join(texts, groupSep), meta: lines[g].meta}.render() + "\n"
}
