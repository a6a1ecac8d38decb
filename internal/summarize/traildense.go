package summarize

import "strings"

// The dense form of trail lines: all but a file's changes and the newest
// lines (within 1/wholeShare of the budget) are shown by their texts
// alone, verbatim and whole (a path, a command's head, a test id, an
// error's first line), one a line under a head line per tag (and exit
// status other than 0: denseKind) that names the summary's id (expanding
// it reads what they came from), without a line's other facts (its
// message id, a file's hash). A text costs about a token more
// than itself (its newline), a whole line about eight more: at small
// windows the trail names every command, read and passing test where it
// folded a fifth of them into a count, and everywhere it is re-sent for
// less.

// denseMark ends the head line of a tag's dense texts, before the id.
const denseMark = ", earlier (behind "

// denseIndent opens a dense text's line when the text could be read as
// something else: one that starts with white space, "-" or "#" (a trail
// line, a section), or is empty. Others are written as they are: the
// indent cost a token a text.
const denseIndent = "  "

// denseHead is the head line of the dense texts of kind (denseKind) in
// summary id.
func denseHead(kind, id string) string { return "- " + kind + denseMark + id + "):\n" }

// denseExit joins a tag and a command's exit status in a dense kind.
const denseExit = ", exit "

// denseKind is what a dense text is listed under: its tag and, for a
// command that printed an exit status other than 0, that status ("ran,
// exit 2"). Listed with the rest under its tag alone, a command that
// failed read as one that printed none, which the trail's header says a
// line shows (TestDenseTextsKeepTheirExitStatus).
func denseKind(l trailLine) string {
	if status, _, ok := strings.Cut(l.meta, ", "); ok && strings.HasPrefix(status, "exit ") {
		return l.tag + denseExit + strings.TrimPrefix(status, "exit ")
	}
	return l.tag
}

// denseItem is one dense text's line.
func denseItem(text string) string {
	if text == "" || strings.ContainsAny(text[:1], " \t-#") {
		return denseIndent + text + "\n"
	}
	return text + "\n"
}

// denseText returns the text of a line under a dense head, or false when
// the line is not one (a trail line, a section, an empty line).
func denseText(line string) (string, bool) {
	if text, ok := strings.CutPrefix(line, denseIndent); ok {
		return text, text != ""
	}
	if line == "" || strings.ContainsAny(line[:1], " \t-#") {
		return "", false
	}
	return line, true
}

// denseGroup is the head a dense line of a summary with id is listed
// under: its key, its kind (denseKind) and the id the head names. That is
// the summary's own id (its originals hold the previous summary, whose
// trail showed the line), except for a line placed again from what the
// previous summary folded (restored): the previous summary's text only
// counts it, so the head names the line's own id, which leads to it in
// one expand (a message's, or the summary whose originals showed it).
// Named by the summary's id, such a line was two expands away once it
// folded again (TestRestoredDenseLinesNameTheirOwnID).
func denseGroup(l trailLine, id string) (key, kind, head string) {
	kind, head = denseKind(l), id
	if l.restored {
		if own := l.idOf(); messageID(own) {
			head = own
		}
	}
	return kind + "\x00" + head, kind, head
}

// renderDense renders the lines marked dense: one head line per kind
// and id (denseGroup), in the order of each group's first dense line, and
// under it that group's texts, oldest first.
func renderDense(lines []trailLine, dense []bool, id string) string {
	var keys []string
	heads := map[string]string{}
	texts := map[string][]string{}
	for i, l := range lines {
		if !dense[i] {
			continue
		}
		k, kind, head := denseGroup(l, id)
		if _, ok := texts[k]; !ok {
			keys = append(keys, k)
			heads[k] = denseHead(kind, head)
		}
		texts[k] = append(texts[k], denseTextOf(l))
	}
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(heads[k])
		for _, t := range texts[k] {
			b.WriteString(denseItem(t))
		}
	}
	return b.String()
}

// denseTag returns the kind of a dense head line's body ("ran, earlier
// (behind sum_3_1):", "ran, exit 2, earlier (behind sum_3_1):") and the
// summary id it names, or false.
func denseTag(body string) (string, string, bool) {
	tag, rest, ok := strings.Cut(body, denseMark)
	id, ok2 := strings.CutSuffix(rest, "):")
	if !ok || !ok2 || strings.Contains(tag, ": ") || strings.ContainsAny(id, " ,") {
		return "", "", false
	}
	return tag, id, true
}

// wholeFirst reports whether l is shown whole whenever it fits: a file's
// change and where it was made (its message id, which the dense form
// leaves out, and a last-edit probe asks). A command that wrote files is
// not: its dense text keeps that id (denseTextOf). A command that printed
// an exit status other than 0 whole first too kept 1.7 points fewer
// commands in view at 8k on the corpus (make bench-recall) for 0.7 % more
// on the bill: its error lines are kept first anyway.
func wholeFirst(l trailLine) bool {
	switch l.tag {
	case tagCreated, tagEdited, tagDeleted:
		return true
	}
	return false
}

// wholeShare: the other lines get their whole line back (tag, exit status,
// message id) within 1/wholeShare of the budget, the newest first; the
// rest are shown dense whether or not the trail would fit whole. A whole
// line costs about eight tokens more than its text, re-sent in every
// request until the next compaction: whole lines for all (in view just the
// same) billed 3.0 % more at 8k, 1.5 % more at 12k and 1.8 % more at 16k on
// the corpus than a sixty-fourth; a sixteenth 1.2 %, 0.7 % and 1.0 % more.
const wholeShare = 64

// wholeShort: a trail whose whole lines take at most 1/wholeShort of its
// budget is all whole (a few lines, each with its facts).
const wholeShort = 8

// TrailShape counts the lines of a summary's trail by how they are shown:
// whole, dense and folded into the count of its fold line (the recall
// bench reports how often a trail folds).
func TrailShape(summary string) (whole, dense, folded int) {
	lines, folded, _ := parseTrail(summary)
	for _, l := range lines {
		if l.bare || l.idDense {
			dense++
		} else {
			whole++
		}
	}
	return whole, dense, folded
}

// denseTextOf is l's dense text: its text, and for a command that wrote
// files the id of the message that made the change after it
// (`cat > fix.py << 'EOF'… — msg_38`), which a file's last edit is asked
// with. Shown whole first, as a change, such lines took a fifth of a
// folding trail at 8k on the corpus (make bench-recall), their tag and
// exit status (which the dense head says) about a third of each.
func denseTextOf(l trailLine) string {
	if id := l.idOf(); l.tag == tagWrote && !l.bare && messageID(id) {
		return l.text + metaSep + id
	}
	return l.text
}

// denseWithID reads back a dense text of tag that ends with the id of the
// message that made its change (denseTextOf): its text and that id.
func denseWithID(tag, text string) (string, string, bool) {
	j := strings.LastIndex(text, metaSep)
	if tag != tagWrote || j < 0 || !messageID(text[j+len(metaSep):]) {
		return "", "", false
	}
	return text[:j], text[j+len(metaSep):], true
}

// messageID reports whether id is a stored message's id (a trail line of
// messages without ids names "this summary").
func messageID(id string) bool {
	return (strings.HasPrefix(id, "msg_") || strings.HasPrefix(id, "sum_")) && !strings.ContainsAny(id, " ,")
}

// changeTag reports whether tag is a change's: a file created, edited or
// deleted, or a command that wrote files. Its line names the message that
// made the change (whole, or dense with that id: denseTextOf), which a
// file's last edit is asked with, so it stays on the trail when the view
// shows it again (shownAgain).
func changeTag(tag string) bool {
	return tag == tagWrote || wholeFirst(trailLine{tag: tag})
}
