package costbench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/contextd/contextd/internal/probes"
)

// fileMisses is what one transcript's replay left out of view: its
// commands and all its probes not in view, of those seen (counted after
// every compaction, as the table's).
type fileMisses struct {
	Commands, CommandsSeen, Probes, ProbesSeen int
}

// byFile records r's misses as transcript name's (RunRecall, before
// merging: r is one replay).
func (r *RecallResult) byFile(name string) {
	all := r.All()
	var f fileMisses
	f.Probes, f.ProbesSeen = all.Seen-all.InView, all.Seen
	if c := r.ByKind[probes.Command]; c != nil {
		f.Commands, f.CommandsSeen = c.Seen-c.InView, c.Seen
	}
	if r.ByFile == nil {
		r.ByFile = map[string]fileMisses{}
	}
	r.ByFile[name] = f
}

func (r *RecallResult) mergeByFile(o RecallResult) {
	for name, f := range o.ByFile {
		if r.ByFile == nil {
			r.ByFile = map[string]fileMisses{}
		}
		g := r.ByFile[name]
		g.Commands += f.Commands
		g.CommandsSeen += f.CommandsSeen
		g.Probes += f.Probes
		g.ProbesSeen += f.ProbesSeen
		r.ByFile[name] = g
	}
}

// PrintMissesByFile writes, per window and strategy, the transcripts with
// probes not in view, most commands not in view first: where the misses
// of the table come from (at 8k, one transcript's trail that does not fit
// its budget can hold most of them).
func PrintMissesByFile(w io.Writer, results []RecallResult) {
	fmt.Fprintln(w, "\nNot in view, by transcript (commands and all probes not in view, of those seen)")
	for _, r := range results {
		names := slices.SortedFunc(maps.Keys(r.ByFile), func(a, b string) int {
			return cmp.Or(cmp.Compare(r.ByFile[b].Commands, r.ByFile[a].Commands), cmp.Compare(r.ByFile[b].Probes, r.ByFile[a].Probes), cmp.Compare(a, b))
		})
		for _, name := range names {
			f := r.ByFile[name]
			if f.Probes == 0 {
				continue
			}
			fmt.Fprintf(w, "%dk, %s, %s: commands %d of %d, probes %d of %d\n", r.Window/1024, r.Strategy, name, f.Commands, f.CommandsSeen, f.Probes, f.ProbesSeen)
		}
	}
}
