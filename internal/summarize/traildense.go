package summarize

import "strings"

// The dense form of trail lines: when not every line fits whole, the
// older lines of a tag are shown by their texts alone, verbatim and whole
// (a path, a command's head, a test id), one a line under a head line per
// tag that names the summary's id (expanding it reads what they came
// from), without a line's facts (its exit status, its message id). A text
// costs about two tokens more than itself, a whole line about eight more:
// at small windows the trail names every command, read and passing test
// where it folded a fifth of them into a count.

// denseMark ends the head line of a tag's dense texts, before the id.
const denseMark = ", earlier (behind "

// denseIndent opens each dense text's line.
const denseIndent = "  "

// denseHead is the head line of the dense texts of tag in summary id.
func denseHead(tag, id string) string { return "- " + tag + denseMark + id + "):\n" }

// denseItem is one dense text's line.
func denseItem(text string) string { return denseIndent + text + "\n" }

// renderDense renders the lines marked dense: one head line per tag, in
// the order of each tag's first dense line, and under it that tag's
// texts, oldest first.
func renderDense(lines []trailLine, dense []bool, id string) string {
	var tags []string
	texts := map[string][]string{}
	for i, l := range lines {
		if !dense[i] {
			continue
		}
		if _, ok := texts[l.tag]; !ok {
			tags = append(tags, l.tag)
		}
		texts[l.tag] = append(texts[l.tag], l.text)
	}
	var b strings.Builder
	for _, tag := range tags {
		b.WriteString(denseHead(tag, id))
		for _, t := range texts[tag] {
			b.WriteString(denseItem(t))
		}
	}
	return b.String()
}

// denseTag returns the tag of a dense head line's body ("ran, earlier
// (behind sum_3_1):") and the summary id it names, or false.
func denseTag(body string) (string, string, bool) {
	tag, rest, ok := strings.Cut(body, denseMark)
	id, ok2 := strings.CutSuffix(rest, "):")
	if !ok || !ok2 || strings.Contains(tag, ": ") || strings.ContainsAny(id, " ,") {
		return "", "", false
	}
	return tag, id, true
}

// changes reports whether lines of tag say a file's change and where it
// was made (its message id, which the dense form leaves out): they stay
// whole first when lines fold.
func changes(tag string) bool {
	switch tag {
	case tagCreated, tagEdited, tagDeleted, tagWrote:
		return true
	}
	return false
}

// TrailShape counts the lines of a summary's trail by how they are shown:
// whole, dense and folded into the count of its fold line (the recall
// bench reports how often a trail folds).
func TrailShape(summary string) (whole, dense, folded int) {
	lines, folded, _ := parseTrail(cut(summary, MaxSectionChars))
	for _, l := range lines {
		if l.bare {
			dense++
		} else {
			whole++
		}
	}
	return whole, dense, folded
}
