package summarize

import (
	"slices"
	"strconv"
	"strings"
)

// The extractive summary's lists (listSections, and Files) are carried
// from summary to summary, not written anew: an entry its cap leaves out
// (proseCap, a sixteenth of summary_max_tokens once the prose yielded to a
// folding trail; Files' own budget) would never come back. It is folded
// instead: one line a list, on the side of its oldest entries (first in
// the lists, last in Files, which is most recent first), counts the entries left out and names the ids
// whose originals hold them whole, newest first: this summary's (its
// originals are the messages an entry came from and the previous summary,
// which held the carried ones), then the ids a fold the previous summary
// carried named, at most maxListFoldIDs (an older id is named by the
// summary the first one stands for, one expand further).
//
//   - folded: 12 earlier entries, in sum_4_1, sum_2_1
const (
	listFoldPrefix = "folded: "
	listFoldN      = " earlier entries"
	listFoldIn     = ", in "
	maxListFoldIDs = 3
	// maxListFoldCount bounds a fold's count: a previous summary (an
	// LLM's may write anything) could count past an int, and merged
	// counts overflowed to a negative or a small, wrong one.
	maxListFoldCount = 1 << 30
	// quotedEntry starts an entry a message gave that reads as a fold line
	// (a tool's output may): the chained summary reads it as an entry,
	// not as a count of entries and ids to expand (quoteFoldLike).
	quotedEntry = "> "
)

// listFold is what one list left out: how many entries, and the ids whose
// originals hold them, newest first.
type listFold struct {
	n   int
	ids []string
}

// line is the fold's bullet text ("" when nothing is folded).
func (f listFold) line() string {
	if f.n == 0 {
		return ""
	}
	line := listFoldPrefix + strconv.Itoa(f.n) + listFoldN
	if len(f.ids) > 0 { // a hand-off has no id of its own
		line += listFoldIn + strings.Join(f.ids, ", ")
	}
	return line
}

// add counts n more entries left out, held by id's originals.
func (f listFold) add(n int, id string) listFold {
	if n == 0 {
		return f
	}
	ids := []string{id}
	for _, old := range f.ids {
		if old != id && len(ids) < maxListFoldIDs {
			ids = append(ids, old)
		}
	}
	if id == "" { // no id to name (a summary input without one): keep the older ones
		ids = f.ids
	}
	return listFold{n: min(f.n+min(n, maxListFoldCount), maxListFoldCount), ids: ids}
}

// splitListFold takes a carried list's fold line out of items (the
// previous summary's, parseSections) and returns what it counted.
func splitListFold(items []string) ([]string, listFold) {
	var f listFold
	out := items[:0:0]
	for _, it := range items {
		rest, ok := strings.CutPrefix(it, listFoldPrefix)
		n, ids, ok2 := strings.Cut(rest, listFoldN)
		count, err := strconv.Atoi(n)
		ids, ok3 := strings.CutPrefix(ids, listFoldIn)
		if !ok || !ok2 || err != nil || count <= 0 || (!ok3 && ids != "") || !foldIDs(ids) {
			out = append(out, it)
			continue
		}
		f.n = min(f.n+min(count, maxListFoldCount), maxListFoldCount)
		for _, id := range strings.Split(ids, ", ") {
			if id = strings.TrimSpace(id); id != "" && len(f.ids) < maxListFoldIDs && !slices.Contains(f.ids, id) {
				f.ids = append(f.ids, id)
			}
		}
	}
	return out, f
}

// maxFoldIDBytes bounds one id a fold line names (contextd's are
// sum_<round>_<n>).
const maxFoldIDBytes = 64

// foldIDs reports whether ids, what a fold line names after listFoldIn,
// are ids: at most maxListFoldIDs, each of letters, digits, '_', '-' and
// '.', at most maxFoldIDBytes. A line naming anything else (an LLM of an
// earlier release wrote its summaries' fold lines, and text with spaces
// or kilobytes of one word is no id) is an entry, not a fold
// (TestFoldIDsAreIDs).
func foldIDs(ids string) bool {
	if ids == "" {
		return true
	}
	list := strings.Split(ids, ", ")
	if len(list) > maxListFoldIDs {
		return false
	}
	for _, id := range list {
		if id == "" || len(id) > maxFoldIDBytes || strings.IndexFunc(id, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
		}) >= 0 {
			return false
		}
	}
	return true
}

// quoteFoldLike marks the entries of items that read as a fold line
// (foldLike) with quotedEntry: only the summarizer writes fold lines, a
// message's text (a tenant's tool output) never counts entries or names
// ids in one.
func quoteFoldLike(items []string) []string {
	for i, it := range items {
		if foldLike(it) {
			items[i] = quotedEntry + it
		}
	}
	return items
}

// foldLike reports whether an entry reads as a fold line: "folded: N
// earlier entries", whatever follows (splitListFold reads only those
// whose count and ids hold up; the others are still quoted, so that no
// reader, a model included, takes them for one).
func foldLike(item string) bool {
	rest, ok := strings.CutPrefix(item, listFoldPrefix)
	n, _, ok2 := strings.Cut(rest, listFoldN)
	_, err := strconv.Atoi(n)
	return ok && ok2 && err == nil
}

// foldLast is Files' paths (most recent first) before its fold line, if
// any.
func foldLast(f listFold, items []string) []string {
	if l := f.line(); l != "" {
		return append(items[:len(items):len(items)], l)
	}
	return items
}

// withFold is a list's items after its fold line, if any.
func withFold(f listFold, items []string) []string {
	if l := f.line(); l != "" {
		return append([]string{l}, items...)
	}
	return items
}
