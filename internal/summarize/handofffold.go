package summarize

// A hand-off carries the lists of the session it was written from (its
// latest summary's and what came after) to a new session. Their fold lines
// (listfold.go) name that session's summaries, which the new session does
// not hold: its expand tool reads its own messages only, and its own
// rounds write ids of the same shape (`sum_4_1`), so an id alone would name
// another message there. A hand-off's fold line names the session its ids
// belong to (`- folded: 12 earlier entries, in sum_4_1, sum_2_1 of session
// s_old`; ExpandMessage on that session reads them; the new session's label
// contextd.handoff_from names it too), and what the document leaves out of
// a list beyond its own length is counted in a fold line of its own
// (`in session s_old`: that session's view holds them), never dropped
// silently (TestHandoffFoldsNameTheirSession).

// handoffOf is the session phrase a hand-off's fold line ends with.
const handoffOf = " of session "

// handoffList is a list of the hand-off: its last keep entries (all when
// keep <= 0: Files, placed last, most recent first, is kept whole) after
// (before, when last is set) the fold lines that count what the session's
// summaries folded, naming the session their ids are in, and what the
// document leaves out, which is in that session's view (the latest
// summary's text, or the messages after it) and behind none of those ids:
// counted apart (TestHandoffCountsWhatItLeavesOutApart).
func handoffList(items []string, keep int, last bool, session string) []string {
	items, f := splitListFold(items)
	left := 0
	if keep > 0 && len(items) > keep {
		left = min(len(items)-keep, maxListFoldCount)
		items = items[len(items)-keep:]
	}
	inSession := listFoldIn + "session " + session
	var folds []string
	if f.n > 0 {
		line := f.line()
		switch {
		case session == "":
		case len(f.ids) > 0:
			line += handoffOf + session
		default:
			line += inSession
		}
		folds = append(folds, line)
	}
	if left > 0 {
		line := listFold{n: left}.line()
		if session != "" {
			line += inSession
		}
		folds = append(folds, line)
	}
	if last {
		return append(items[:len(items):len(items)], folds...)
	}
	return append(folds, items...)
}
