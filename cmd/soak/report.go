package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Problem classes of the last line.
const (
	lost = iota
	duplicated
	invalid
	stuck
	leaked
	classes
)

var classNames = [classes]string{"lost", "duplicated", "invalid", "stuck", "leaked"}

// report gathers the problems found, the operations acknowledged and
// their latencies.
type report struct {
	start time.Time

	mu       sync.Mutex
	problems [classes][]string
	ops      int
	errors   map[string]int // failed attempts by RPC and reason (retried)
	lat      map[string][]time.Duration
	timeline []latSample // every acknowledged operation, for the plot
	notes    []string
}

type latSample struct {
	at  time.Duration
	lat time.Duration
}

func newReport() *report {
	return &report{start: time.Now(), errors: map[string]int{}, lat: map[string][]time.Duration{}}
}

func (r *report) problem(class int, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems[class] = append(r.problems[class], fmt.Sprintf(format, args...))
}

func (r *report) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// ack records an acknowledged operation: rpc took d from its first
// attempt to its answer (retries included).
func (r *report) ack(rpc string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops++
	r.lat[rpc] = append(r.lat[rpc], d)
	r.timeline = append(r.timeline, latSample{at: time.Since(r.start), lat: d})
}

func (r *report) failed(rpc, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors[rpc+": "+reason]++
}

func (r *report) counts() (n [classes]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range n {
		n[c] = len(r.problems[c])
	}
	return n
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

// writeLatencies prints p50/p99 per RPC.
func (r *report) writeLatencies(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.lat))
	for k := range r.lat {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "%-28s %8s %10s %10s %10s\n", "operation (retries included)", "count", "p50", "p99", "max")
	for _, k := range names {
		l := slices.Clone(r.lat[k])
		slices.Sort(l)
		fmt.Fprintf(w, "%-28s %8d %10s %10s %10s\n", k, len(l), percentile(l, 0.5).Round(time.Millisecond),
			percentile(l, 0.99).Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond))
	}
	if len(r.errors) > 0 {
		keys := make([]string, 0, len(r.errors))
		for k := range r.errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintln(w, "failed attempts (retried as the SDKs do):")
		for _, k := range keys {
			fmt.Fprintf(w, "  %6d  %s\n", r.errors[k], k)
		}
	}
}

// writeProblems prints every problem found, at most 20 a class.
func (r *report) writeProblems(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.notes {
		fmt.Fprintln(w, "note:", n)
	}
	for c, list := range r.problems {
		// The same problem many times is one line with its count.
		seen := map[string]int{}
		var order []string
		for _, p := range list {
			if seen[p] == 0 {
				order = append(order, p)
			}
			seen[p]++
		}
		for i, p := range order {
			if i == 30 {
				fmt.Fprintf(w, "%s: ... and %d more\n", classNames[c], len(order)-30)
				break
			}
			if seen[p] > 1 {
				fmt.Fprintf(w, "%s: %s (%d times)\n", classNames[c], p, seen[p])
			} else {
				fmt.Fprintf(w, "%s: %s\n", classNames[c], p)
			}
		}
	}
}

func (r *report) lastLine(faults int) string {
	n := r.counts()
	r.mu.Lock()
	ops := r.ops
	r.mu.Unlock()
	parts := make([]string, 0, classes)
	for c := range n {
		parts = append(parts, fmt.Sprintf("%s %d", classNames[c], n[c]))
	}
	return fmt.Sprintf("soak: %d operations, %d faults, %s", ops, faults, strings.Join(parts, ", "))
}
