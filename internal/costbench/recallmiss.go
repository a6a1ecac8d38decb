package costbench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/probes"
	"github.com/contextd/contextd/internal/summarize"
)

// Why a probe is not in view after a compaction (RecallResult.Misses):
// where its message went and what the view holds of it.
const (
	// missMasked: its message is behind a placeholder of the view (a
	// pruned result) that does not hold it.
	missMasked = "masked result"
	// missFolded: behind a summary of the view whose trail folds lines
	// into a count (summarize.TrailShape; the trail's budget was spent on
	// others).
	missFolded = "folded in the trail"
	// missOlder: behind an older summary that a summary of the view names
	// (its fold line or a dense head): folded or shown densely then, and
	// folded since.
	missOlder = "behind an older summary"
	// missUntrailed: behind a summary whose trail folds nothing, so the
	// trail does not hold it in the probe's words (a user message beyond
	// the kept budget, a text the trail writes otherwise).
	missUntrailed = "summarized, not in the trail"
	// missNamed: the view names its message's id (one expand away).
	missNamed = "named by id"
	// missLost: none of these (drop-middle's dropped turns).
	missLost = "lost"
)

// missReasons is the order the reasons are printed in.
var missReasons = []string{missMasked, missFolded, missOlder, missUntrailed, missNamed, missLost}

// syntheticKinds labels the synthetic messages a view holds or names by
// the miss reason of a probe behind them.
func syntheticKinds(view []chat.Message, named []string) map[string]string {
	out := map[string]string{}
	for i := range view {
		switch m := &view[i]; m.Kind {
		case chat.KindPlaceholder:
			out[m.ID] = missMasked
		case chat.KindSummary:
			out[m.ID] = missUntrailed
			if _, _, folded := summarize.TrailShape(m.Text()); folded > 0 {
				out[m.ID] = missFolded
			}
		}
	}
	for _, id := range named {
		if _, ok := out[id]; !ok {
			out[id] = missOlder
		}
	}
	return out
}

// missReason is why probe p is not in view: the kind of the first
// synthetic message (in synthetic's order) whose originals hold its
// message, else of the first whose originals hold its needles (an older
// occurrence, or a summary behind it), else whether the view names its
// id.
func missReason(p probes.Probe, synthetic []string, kinds, expanded map[string]string, named func(string) bool) string {
	for _, id := range synthetic {
		if strings.Contains(expanded[id], "\x00id:"+p.Origin+"\x00") {
			return kinds[id]
		}
	}
	for _, id := range synthetic {
		if holdsAll(expanded[id], p.Needles) {
			return kinds[id]
		}
	}
	if named(p.Origin) {
		return missNamed
	}
	return missLost
}

// addMiss counts n probes of kind k not in view, for reason.
func (r *RecallResult) addMiss(k probes.Kind, reason string, n int) {
	if r.Misses == nil {
		r.Misses = map[probes.Kind]map[string]int{}
	}
	if r.Misses[k] == nil {
		r.Misses[k] = map[string]int{}
	}
	r.Misses[k][reason] += n
}

func (r *RecallResult) mergeMisses(o RecallResult) {
	for k, by := range o.Misses {
		for reason, n := range by {
			r.addMiss(k, reason, n)
		}
	}
}

// PrintMisses writes, per window and strategy, the probes not in view per
// kind and why (counted after every compaction, as the table's).
func PrintMisses(w io.Writer, results []RecallResult) {
	fmt.Fprintln(w, "\nNot in view, by kind and why (probes, counted after every compaction)")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprint(tw, "| window\t strategy\t kind\t")
	for _, reason := range missReasons {
		fmt.Fprintf(tw, " %s\t", reason)
	}
	fmt.Fprint(tw, "\n|---\t---\t---\t")
	for range missReasons {
		fmt.Fprint(tw, "---:\t")
	}
	fmt.Fprintln(tw)
	for _, r := range results {
		kinds := slices.Sorted(func(yield func(probes.Kind) bool) {
			for k := range r.Misses {
				if !yield(k) {
					return
				}
			}
		})
		for _, k := range kinds {
			fmt.Fprintf(tw, "| %dk\t %s\t %s\t", r.Window/1024, r.Strategy, k)
			for _, reason := range missReasons {
				fmt.Fprintf(tw, " %d\t", r.Misses[k][reason])
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "\nCompactions whose request is above the target they aim at (the cache target) and above the warning threshold")
	for _, r := range results {
		if !strings.Contains(r.Strategy, "drop-middle") {
			fmt.Fprintf(w, "%dk, %s: %d of %d above the target, %d above the warning threshold\n", r.Window/1024, r.Strategy, r.OverTarget, r.Compactions, r.OverWarning)
		}
	}
}

// holdsAll reports whether text holds every needle verbatim.
func holdsAll(text string, needles []string) bool {
	for _, n := range needles {
		if !strings.Contains(text, n) {
			return false
		}
	}
	return true
}
