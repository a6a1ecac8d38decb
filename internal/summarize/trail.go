package summarize

import (
	"slices"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/probes"
)

// SecTrail is the exact artifact trail every summary ends with, whatever
// wrote the rest: computed by contextd from the originals the summary
// replaces (internal/probes), never by a model. One line per file touched
// (its last action and the message that did it; a read is left out when
// the command that read it names the path), distinct command run (its head,
// its exit status when it printed one other than 0), test (its last
// result), error (its first line), URL, and user message the summary stands
// for; each line names the message id to expand. A summary that integrates
// an earlier one merges its trail (a line that recurs moves to the end with
// its latest facts) instead of summarizing it. Within the trail's budget
// (compaction.TrailBudget) what failed and what changed are kept first
// (errors, failing tests, files created, edited or deleted, the person's
// messages), then URLs, then the rest, newest first, all but changes and
// the newest lines by their texts alone (traildense.go); only what does not
// fit even so folds into one line that counts it and names its message ids
// and the summary's.
const SecTrail = "Trail"

// trailHeading is the section's title line and the start of the sentence
// under it, which trailHeader and trailHeaderNamed end.
const trailHeading = "\n## " + SecTrail + "\n(exact, from the original messages; a command's exit status shows when it printed one other than 0; "

// trailHeader is the section's title line and the sentence under it.
const trailHeader = trailHeading + "expand an id to read one)\n"

// trailHeaderNamed is trailHeader for a model that can call nothing.
const trailHeaderNamed = trailHeading + "the ids name what they came from)\n"

// trailHeaderOf is trailHeader in the wording e: a model that can call
// nothing to expand (compaction.ExpandByNone) is not told to.
func trailHeaderOf(e compaction.Expander) string {
	if e == compaction.ExpandByNone {
		return trailHeaderNamed
	}
	return trailHeader
}

// Tags of trail lines.
const (
	tagRead    = "read"
	tagCreated = "created"
	tagEdited  = "edited"
	tagDeleted = "deleted"
	tagRan     = "ran"
	tagWrote   = "wrote" // a command that created, changed or deleted the files it names
	tagPassed  = "test passed"
	tagFailed  = "test failed"
	tagError   = "error"
	tagURL     = "url"
	tagUser    = "user"
	tagFolded  = "folded"
)

// metaSep separates a line's text from its facts (status, message id).
const metaSep = " — "

// rank orders lines when the trail folds (lowest kept first): what failed
// (errors, failing tests), what changed (files created, edited, deleted)
// and the person's messages — few lines, each a fact the agent cannot
// rebuild by running a command again — then URLs (also facts, but one
// fetched page can hold hundreds of them: ranked with the first, they
// folded every edit and error before them), then the rest.
func (l trailLine) rank() int {
	switch l.tag {
	case tagError, tagFailed, tagCreated, tagEdited, tagDeleted, tagWrote, tagUser:
		return 0
	case tagURL:
		return 1
	}
	return 2
}

// maxTrailLines bounds the lines a trail keeps, folded or not, so its work
// is linear in the originals and the previous trail.
const maxTrailLines = 2000

// trailLine is one entry: key identifies what it is about (a file's path,
// a command, a test, ...), so a newer fact replaces an older one.
type trailLine struct {
	key, tag, text, meta string
	// bare: read back from a dense form (traildense.go), with no facts
	// but a command's exit status; meta is that status, if any, and the
	// id of the summary whose originals hold it ("exit 2, sum_1_1"). It
	// is only ever shown dense.
	bare bool
	// idDense: read back from the dense form of a command that wrote
	// files, which keeps its message id (denseTextOf): it has its facts.
	idDense bool
	// restored: placed again from the lines the previous summary folded
	// (SummaryInput.PreviousFolded): its id is its own, since the previous
	// summary's text only counts it (denseGroup).
	restored bool
}

func (l trailLine) render() string {
	text := l.text
	if quoted(l) {
		text = quote + text + quote
	}
	return "- " + l.tag + ": " + text + metaSep + l.meta
}

// parseTrail reads the trail section of a previous summary: its lines, in
// order, how many older ones it had folded and the message ids it named
// for them. It reads the summary whole, line by line (it is a message of
// the view, within the window), and keeps its last maxTrailLines lines
// (between maxTrailLines and twice as many while it reads): the older
// ones are counted as folded, their ids named after those the newer
// lines'. Cut to its head and tail, as it was (50,000 bytes), a long
// trail lost its middle lines uncounted, and the line across the cut
// came back as one text holding two halves and the cut's marker.
func parseTrail(summary string) ([]trailLine, int, []string) {
	i := strings.Index(summary, "\n## "+SecTrail+"\n")
	if i < 0 {
		return nil, 0, nil
	}
	var out []trailLine
	var ids, droppedIDs []string
	folded := 0
	drop := func(n int) {
		for _, l := range out[:n] {
			folded++
			droppedIDs = append(droppedIDs, l.idOf())
		}
		out = append(out[:0], out[n:]...)
	}
	denseOf, denseMeta := "", "" // the tag of the dense texts being read, and their meta (exit status, the summary they are behind)
	for line := range strings.SplitSeq(summary[i+len(SecTrail)+5:], "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if len(out) >= 2*maxTrailLines {
			drop(len(out) - maxTrailLines)
		}
		if text, ok := denseText(line); ok && denseOf != "" {
			if t, id, ok := denseWithID(denseOf, text); ok { // a change's text and its id: its facts
				meta := id
				if status, _, ok := strings.Cut(denseMeta, ", "); ok && strings.HasPrefix(status, "exit ") {
					meta = status + ", " + id
				}
				out = append(out, trailLine{key: keyOf(denseOf, strings.TrimSuffix(t, "…")), tag: denseOf, text: t, meta: meta, idDense: true})
				continue
			}
			out = append(out, trailLine{key: keyOf(denseOf, strings.TrimSuffix(text, "…")), tag: denseOf, text: text, meta: denseMeta, bare: true})
			continue
		}
		body, ok := strings.CutPrefix(line, "- ")
		denseOf = ""
		if !ok {
			continue
		}
		if kind, id, ok := denseTag(body); ok {
			denseOf, denseMeta = kind, id
			if tag, status, ok := strings.Cut(kind, denseExit); ok {
				denseOf, denseMeta = tag, "exit "+status+", "+id
			}
			continue
		}
		tag, rest, ok := strings.Cut(body, ": ")
		if !ok {
			continue
		}
		if tag == tagFolded {
			n, _ := strconv.Atoi(strings.Fields(rest + " ")[0])
			folded += n
			if _, list, ok := strings.Cut(rest, foldedFrom); ok { // "older lines" before they were "other"
				list, _, _ = strings.Cut(list, ".")
				for _, id := range strings.Split(list, ", ") {
					if id = strings.TrimSpace(id); id != "" {
						ids = append(ids, id)
					}
				}
			}
			continue
		}
		j := strings.LastIndex(rest, metaSep)
		if j < 0 {
			continue
		}
		l := trailLine{tag: tag, text: rest[:j], meta: rest[j+len(metaSep):]}
		texts := []string{l.text}
		if groupTag(tag) {
			texts = splitGroup(l.text) // a group's line, or a quoted text
		}
		for _, text := range texts {
			l.text = text
			l.key = keyOf(l.tag, strings.TrimSuffix(l.text, "…"))
			out = append(out, l)
		}
	}
	if len(out) > maxTrailLines {
		drop(len(out) - maxTrailLines)
	}
	// ids run newest first: the dropped lines' (newer than what the fold
	// line counted), then the fold line's.
	slices.Reverse(droppedIDs)
	return out, folded, append(droppedIDs, ids...)
}

// trailFiles returns the paths a summary's trail shows, newest first: its
// file lines', and those its commands name (a Files section leaves out what
// the trail shows, and carries it on once a later trail folds it).
func trailFiles(summary string) []string {
	lines, _, _ := parseTrail(summary)
	var out []string
	for i := len(lines) - 1; i >= 0; i-- {
		switch lines[i].tag {
		case tagRead, tagCreated, tagEdited, tagDeleted:
			out = append(out, lines[i].text)
		case tagRan, tagWrote:
			out = append(out, pathRe.FindAllString(urlRe.ReplaceAllString(lines[i].text, " "), -1)...)
		}
	}
	return out
}

// trailFrom is the first message the trail reads: the newest messages
// whose texts, each part counted up to MaxSectionChars, hold at most
// MaxExtractiveChars (the extractive summary's bound; at least the newest
// message). Each output is then read for at most 64 KiB (internal/probes),
// so a trail's work is bounded whatever the view.
func trailFrom(msgs []chat.Message) int {
	total := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		n := 0
		for _, p := range msgs[i].Parts {
			l := len(p.Text)
			if p.ToolCall != nil {
				l = len(p.ToolCall.Arguments)
			}
			if p.ToolResult != nil {
				l = len(p.ToolResult.Content)
			}
			n += min(l, MaxSectionChars)
		}
		if total+n > MaxExtractiveChars && i < len(msgs)-1 {
			return i + 1
		}
		total += n
	}
	return 0
}

// foldedIDs introduces the message ids a fold line names; foldedFrom is
// its end, which fold lines of every version share.
const (
	foldedIDs  = " other lines, from messages "
	foldedFrom = " lines, from messages "
)

// idOf is the message id a line's facts end with.
func (l trailLine) idOf() string {
	f := strings.Fields(l.meta)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// keyOf is what a line is about: files by path, tests by name, others by
// their text.
func keyOf(tag, text string) string {
	switch tag {
	case tagRead, tagCreated, tagEdited, tagDeleted:
		return "file\x00" + text
	case tagPassed, tagFailed:
		return "test\x00" + text
	case tagWrote:
		return tagRan + "\x00" + text // a command, whatever it did
	}
	return tag + "\x00" + text
}

// trailLines are the lines of the events of msgs, in order. A file's line
// says its last change (a read after it does not hide it) or, never
// changed, its last read.
func trailLines(msgs []chat.Message) []trailLine {
	// A placeholder of one original (a pruned output) is named by that
	// original's id: expanding it reads the output itself, and it is the
	// id the artifact came from.
	original := map[string]string{}
	for i := range msgs {
		if m := &msgs[i]; m.Kind == chat.KindPlaceholder && len(m.Replaces) == 1 {
			original[m.ID] = m.Replaces[0]
		}
	}
	var out []trailLine
	// The lines in out of the commands of each call (message id and call
	// id: one message may hold a command and an editor's call on the same
	// file, and the command did not write it).
	ran := map[string][]int{}
	callOf := func(ref string, e probes.Event) string { return ref + "\x00" + e.CallID }
	// namedBy returns the line of a command of call that names path as a
	// whole, or -1.
	namedBy := func(call, path string) int {
		for _, i := range ran[call] {
			if holdsPath(out[i].text, path) {
				return i
			}
		}
		return -1
	}
	for _, e := range probes.Extract(msgs) {
		ref := e.MsgID
		if o, ok := original[ref]; ok {
			ref = o
		}
		if ref == "" {
			ref = "this summary"
		}
		var l trailLine
		switch e.Kind {
		case probes.File:
			if i := namedBy(callOf(ref, e), e.Text); i >= 0 && e.Hash == "" {
				// The command that read or wrote it names it, with its id;
				// one that wrote it says so in its tag (and ranks as the
				// change it made).
				if e.Action != probes.Read {
					out[i].tag = tagWrote
				}
				continue
			}
			l = trailLine{tag: map[string]string{probes.Read: tagRead, probes.Create: tagCreated, probes.Edit: tagEdited, probes.Delete: tagDeleted}[e.Action], text: e.Text, meta: ref}
			if e.Hash != "" {
				l.meta = "sha256 " + e.Hash + ", " + ref
			}
		case probes.Command:
			l = trailLine{tag: tagRan, text: e.Text, meta: ref}
			ran[callOf(ref, e)] = append(ran[callOf(ref, e)], len(out))
			if e.Status != "" && e.Status != "0" {
				l.meta = "exit " + e.Status + ", " + ref
			}
			if e.Cut {
				l.text += "…"
			}
		case probes.Test:
			l = trailLine{tag: tagPassed, text: e.Text, meta: ref}
			if e.Status == probes.Fail {
				l.tag = tagFailed
			}
		case probes.Error:
			l = trailLine{tag: tagError, text: e.Text, meta: ref}
			if e.Cut {
				l.text += "…"
			}
		case probes.URL:
			l = trailLine{tag: tagURL, text: e.Text, meta: ref}
		case probes.User, probes.Standing:
			head, cut := probes.Head(e.Text)
			if cut {
				head += "…"
			}
			l = trailLine{tag: tagUser, text: head, meta: ref}
		default:
			continue
		}
		l.key = keyOf(l.tag, strings.TrimSuffix(l.text, "…"))
		out = append(out, l)
	}
	return out
}

// mergeTrail returns prev followed by next, a line whose key recurs moved
// to its newest place with its newest facts; a read of a file that changed
// is left out (its line keeps saying the change, and where it was made).
func mergeTrail(prev, next []trailLine) []trailLine {
	at := map[string]int{}
	all := append(append([]trailLine(nil), prev...), next...)
	changed := func(tag string) bool { return tag == tagCreated || tag == tagEdited || tag == tagDeleted }
	for i, l := range all {
		j, ok := at[l.key]
		switch {
		case ok && l.tag == tagRead && changed(all[j].tag):
			all[i].key = ""
			continue
		case ok:
			all[j].key = "" // superseded
		}
		at[l.key] = i
	}
	out := all[:0]
	for _, l := range all {
		if l.key != "" {
			out = append(out, l)
		}
	}
	return out
}

// Trail renders the trail of a summary of in: the previous summary's trail
// merged with the events of in.Messages, within budget tokens (count
// measures text). What changed is shown whole first (its line names the
// message that made the change); every other line is shown in the dense
// form (its text alone, verbatim, under one line per tag that names the
// summary's id: traildense.go), by rank, newest first, and the newest then
// get their whole line back within 1/wholeShare of the budget (a short
// trail is all whole). Only what does not fit even densely folds into one
// line that counts it and names the message ids it came from, newest
// first, within a quarter of the budget (the rest are behind the summary's
// own id, which the line names too).
func Trail(in compaction.SummaryInput, budget int, count func(string) int) string {
	s, _, _ := trail(in, budget, count)
	return s
}

// trail is Trail, the lines it placed or folded (those it shows are in its
// text; the others folded: foldedLines) and those it left out because the
// view shows them again (shownAgain).
func trail(in compaction.SummaryInput, budget int, count func(string) int) (_ string, placed, again []trailLine) {
	prev, folded, foldIDs := parseTrail(in.Previous)
	prev, folded = restoreFolded(in.PreviousFolded, prev, folded)
	slices.Reverse(foldIDs) // a fold line names them newest first; foldIDs runs oldest first
	from := trailFrom(in.Messages)
	folded += from // messages beyond the read bound: behind the summary's id
	var lines []trailLine
	lines, again = shownAgain(mergeTrail(prev, trailLines(in.Messages[from:])), in.Kept)
	lines, folded, foldIDs = foldBroken(lines, folded, foldIDs)
	if len(lines) > maxTrailLines {
		folded += len(lines) - maxTrailLines
		for _, l := range lines[:len(lines)-maxTrailLines] {
			foldIDs = append(foldIDs, l.idOf())
		}
		lines = lines[len(lines)-maxTrailLines:]
	}
	if len(lines) == 0 && folded == 0 {
		return "", nil, again
	}
	header := count(trailHeaderOf(in.Expand))
	// Each line's cost whole and dense, and each group's whole (groups:
	// the leader's index of each line; a group costs less than its lines
	// alone). A line read back from a dense form has no facts: it is
	// only ever shown dense.
	costs := make([]int, len(lines))
	denseCosts := make([]int, len(lines))
	leader := groups(lines)
	groupCost := map[int]int{}
	for i, l := range lines {
		costs[i] = count(l.render() + "\n")
		denseCosts[i] = count(denseItem(denseTextOf(l)))
		if leader[i] == i {
			groupCost[i] = count(renderGroup(lines, leader, i, nil))
		}
	}
	// total is at most what the all-whole trail counts (below): the
	// header and its groups of whole lines, a token off each for what a
	// whole may merge across a line break.
	total := header - 1
	for g, c := range groupCost {
		total += c - 1
		for i := g; i < len(lines) && leader[i] == g; i++ {
			if lines[i].bare { // shown dense: its group counts less
				total -= c - 1
				break
			}
		}
	}
	headCost := map[string]int{}        // by denseGroup
	group := make([]string, len(lines)) // each line's denseGroup
	for i, l := range lines {
		g, kind, id := denseGroup(l, in.ID)
		group[i] = g
		if headCost[g] == 0 {
			headCost[g] = count(denseHead(kind, id))
		}
	}
	kept := make([]bool, len(lines))  // shown whole
	dense := make([]bool, len(lines)) // shown dense
	used := 0
	render := func(line string) string {
		var b strings.Builder
		b.WriteString(trailHeaderOf(in.Expand))
		b.WriteString(line)
		b.WriteString(renderDense(lines, dense, in.ID))
		for i := range lines {
			if leader[i] == i {
				b.WriteString(renderGroup(lines, leader, i, kept))
			}
		}
		return b.String()
	}

	// A short trail is all whole: its whole lines take at most
	// 1/wholeShort of the budget (rendered only when total, at most its
	// count, says it may).
	if folded == 0 && total <= budget/wholeShort {
		for i, l := range lines {
			dense[i], kept[i] = l.bare, !l.bare
		}
		if all := render(""); count(all) <= budget/wholeShort {
			return all, lines, again
		}
	}
	base := header + count(foldLine(in, folded+len(lines), nil)) // the header and the fold line of every line
	headUsed := map[string]bool{}
	// place shows every line it can within room, by rank, newest first
	// within each: a group whole when it fits, a change whole when it
	// fits, else dense; then the newest dense lines get their whole line
	// back within 1/wholeShare of the budget. A line that does not fit
	// folds and older, shorter ones may still fit. Each line
	// is counted a token more than alone (a count of a whole can exceed
	// the sum of its parts').
	place := func(room int) {
		clear(kept)
		clear(dense)
		clear(headUsed)
		used = base
		whole := func(i int) bool {
			if lines[i].bare {
				return false
			}
			if g := leader[i]; (i+1 == len(lines) || leader[i+1] != g) && i > g && !kept[g] && !dense[g] && used+groupCost[g]+1 <= room {
				used += groupCost[g] + 1 // the whole group, from its newest line
				for j := g; j <= i; j++ {
					kept[j] = true
				}
				return true
			}
			if wholeFirst(lines[i]) && used+costs[i]+1 <= room {
				used += costs[i] + 1
				kept[i] = true
				return true
			}
			return false
		}
		for rank := range 3 {
			for i := len(lines) - 1; i >= 0; i-- {
				if kept[i] || dense[i] || lines[i].rank() != rank || whole(i) {
					continue
				}
				c := denseCosts[i] + 1
				g := group[i]
				if !headUsed[g] {
					c += headCost[g]
				}
				if used+c <= room {
					used += c
					dense[i] = true
					headUsed[g] = true
				}
			}
		}
		room = min(room, used+budget/wholeShare)
		for rank := range 3 {
			for i := len(lines) - 1; i >= 0; i-- {
				if dense[i] && lines[i].rank() == rank && !lines[i].bare && used-denseCosts[i]+costs[i] <= room {
					used += costs[i] - denseCosts[i]
					dense[i], kept[i] = false, true
				}
			}
		}
	}
	// fold is the fold line of what kept and dense leave out: its count,
	// and the message ids of those lines, newest first, deduplicated,
	// within idCap tokens, or only those of only (when not nil).
	fold := func(idCap int, only []string) (string, []string) {
		n, ids := folded, slices.Clone(foldIDs)
		for i, l := range lines {
			if !kept[i] && !dense[i] {
				n++
				ids = append(ids, l.idOf())
			}
		}
		var named []string
		seen := map[string]bool{}
		var onlySet map[string]bool // only, looked up once an id
		if only != nil {
			onlySet = make(map[string]bool, len(only))
			for _, id := range only {
				onlySet[id] = true
			}
		}
		idTokens := 0
		for i := len(ids) - 1; i >= 0; i-- {
			id := ids[i]
			if seen[id] || !messageID(id) || only != nil && !onlySet[id] {
				continue
			}
			c := count(id + ", ")
			if idTokens+c > idCap {
				break
			}
			seen[id] = true
			idTokens += c
			named = append(named, id)
		}
		return foldLine(in, n, named), named
	}
	// fitted renders the trail with the fold line naming ids within
	// idCap (or only those of only); when the whole is over the budget
	// all the same (the fold line's own words, a whole that counts more
	// than its parts), it names fewer, the oldest going first, then shows
	// fewer lines, the oldest of the last rank going first.
	fitted := func(idCap int, only []string) (string, []string) {
		line, named := fold(idCap, only)
		s := render(line)
		n := count(s)
		for ; n > budget && len(named) > 0; n = count(s) {
			over := n - budget
			k := len(named)
			for drop := 0; k > 0 && drop < over; k-- {
				drop += count(named[k-1] + ", ")
			}
			named = named[:k:k] // not nil: fold names only these
			line, _ = fold(idCap, named)
			s = render(line)
		}
		for ; n > budget; n = count(s) {
			over, dropped := n-budget, 0
			for rank := 2; rank >= 0 && dropped < over; rank-- {
				for i := 0; i < len(lines) && dropped < over; i++ {
					if lines[i].rank() == rank && (kept[i] || dense[i]) {
						dropped += denseCosts[i] + 1
						kept[i], dense[i] = false, false
					}
				}
			}
			if dropped == 0 {
				return "", nil
			}
			named = []string{}
			line, _ = fold(0, named)
			s = render(line)
		}
		return s, named
	}
	if base > budget {
		return "", lines, again // not even the fold line fits: no room for a trail
	}
	place(budget)
	shown := true
	for i := range lines {
		shown = shown && (kept[i] || dense[i])
	}
	if folded == 0 && shown {
		s, _ := fitted(0, nil)
		return s, lines, again
	}
	// Something folds: the ids it came from get a quarter of the budget;
	// what the fold line leaves of it then goes to lines, the fold line
	// naming only ids it named already (so it does not grow); over the
	// budget all the same, the first choice stands.
	place(budget - budget/4)
	first, named := fitted(budget/4, nil)
	idTokens := 0
	for _, id := range named {
		idTokens += count(id + ", ")
	}
	if count(first) >= budget-1 || idTokens >= budget/4 {
		return first, lines, again
	}
	place(budget - idTokens - 1)
	if second, _ := fitted(budget/4, named); second != "" && count(second) <= budget {
		return second, lines, again
	}
	return first, lines, again
}

// foldBroken folds the lines whose text holds a line break (a path or a
// URL read out of a tool call's arguments can): written whole or dense,
// the rest of the text was read back by a chained summary as lines of
// their own (a forged command under a forged dense head, a "## " line
// that ended the trail and dropped every line after it) and the text
// itself as its first line, cut. Such a line is counted in the fold line,
// which names its message id (one expand away).
func foldBroken(lines []trailLine, folded int, foldIDs []string) ([]trailLine, int, []string) {
	out := lines[:0]
	for _, l := range lines {
		if strings.ContainsAny(l.text, "\r\n") {
			folded++
			foldIDs = append(foldIDs, l.idOf())
			continue
		}
		out = append(out, l)
	}
	return out, folded, foldIDs
}

// foldLine counts n folded lines and names ids (newest first).
func foldLine(in compaction.SummaryInput, n int, ids []string) string {
	if n == 0 {
		return ""
	}
	from := ""
	if len(ids) > 0 {
		from = foldedIDs + strings.Join(ids, ", ")
	} else {
		from = " other lines"
	}
	return "- " + tagFolded + ": " + strconv.Itoa(n) + from + ". " + compaction.ReadOn(in.Expand, in.ID, "what they came from") + "\n"
}

// MeasureTrail is the trail of a summary of in, the tokens it takes and the
// lines it folded (the planner's compaction.Request.Trail). The planner
// measures before it has a trail (in.Trail is nil there: it sets it on the
// input it summarizes, from what this returned), so in.Trail is not read.
func MeasureTrail(in compaction.SummaryInput) compaction.MeasuredTrail {
	text, lines, again := trail(in, in.TrailTokens(), countOrEstimate(in))
	folded, folds := foldedLines(text, lines, again)
	return compaction.MeasuredTrail{Text: text, Tokens: countOrEstimate(in)(text), Folded: folded, Folds: folds}
}

// trailOf is the trail of a summary of in, within its budget: the
// planner's when it made it (in.Trail, for this very input).
func trailOf(in compaction.SummaryInput) string {
	if in.Trail != nil {
		return *in.Trail
	}
	return Trail(in, in.TrailTokens(), countOrEstimate(in))
}

// withoutTrail returns summary up to its trail section (the trail is the
// last section: withTrail), and whether it had one.
func withoutTrail(summary string) (string, bool) {
	prose, _, ok := strings.Cut(summary, "\n## "+SecTrail+"\n")
	return prose, ok
}

// withTrail returns summary with trail in place of any trail section it
// carried.
func withTrail(summary, trail string) string {
	if i := strings.Index(summary, "\n## "+SecTrail+"\n"); i >= 0 {
		rest := summary[i+1:]
		end := strings.Index(rest[3:], "\n## ")
		if end < 0 {
			summary = summary[:i]
		} else {
			summary = summary[:i] + rest[3+end:]
		}
	}
	return strings.TrimRight(summary, "\n") + "\n" + trail
}
