package main

import "testing"

// TestJudgeLedger: the ledger may lack a few calls answered just before a
// kill (and their tokens), never hold more than was billed; tokens are
// compared even when calls are missing (they were not before: a ledger
// one call short passed whatever its tokens).
func TestJudgeLedger(t *testing.T) {
	bill := usage{calls: 100, input: 50000, output: 4000}
	cases := []struct {
		name     string
		rec      usage
		missable int64
		want     int
	}{
		{"equal", bill, 0, -1},
		{"equal calls, other tokens", usage{100, 50000, 3999}, 5, invalid},
		{"a call more", usage{101, 50100, 4040}, 5, duplicated},
		{"two calls missing, explained", usage{98, 49000, 3920}, 2, -1},
		{"two calls missing, one explained", usage{98, 49000, 3920}, 1, lost},
		{"a call missing but more input tokens than billed", usage{99, 50001, 3960}, 2, duplicated},
		{"a call missing but more output tokens than billed", usage{99, 49500, 4001}, 2, duplicated},
		{"a call missing, all its input tokens recorded", usage{99, 50000, 3960}, 2, invalid},
	}
	for _, c := range cases {
		if got, msg := judgeLedger(c.rec, bill, c.missable); got != c.want {
			t.Errorf("%s: class %d (%s), want %d", c.name, got, msg, c.want)
		}
	}
}
