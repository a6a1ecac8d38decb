package main

import (
	"os"
	"slices"
	"testing"
)

// TestMain runs the binary's -external roles when the tests re-execute
// the test binary as the upstream or a load client (self()).
func TestMain(m *testing.M) {
	if slices.Contains(os.Args, "-role") {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestToolsMeasuresEachCellOnce: -tools 30 makes the plain 1×100 cell
// the one that declares 30 tools; it is measured once, not twice.
func TestToolsMeasuresEachCellOnce(t *testing.T) {
	if got := measured(0); !slices.Equal(got, cells) {
		t.Fatalf("no -tools: %v, want %v", got, cells)
	}
	got := measured(30)
	if len(got) != len(cells)-1 {
		t.Fatalf("-tools 30: %d cells, want %d: %v", len(got), len(cells)-1, got)
	}
	for i, c := range got {
		if c.tools != 30 || slices.Index(got, c) != i {
			t.Errorf("-tools 30: cell %d %v", i, c)
		}
	}
}

// TestExternalLoad: -external's upstream and load client run as processes
// of their own; the load makes every timed call and reports its latencies,
// the last request's size and its CPU, and the upstream its CPU.
func TestExternalLoad(t *testing.T) {
	up, upCPU, stop := spawnUpstream()
	defer stop()
	cpu0 := upCPU()
	l := spawnLoad(3, cell{convs: 2, messages: 10, contentBytes: 50}, up+"/v1/chat/completions", "test")
	latencies, body, own := l.timed()
	if len(latencies) != 2*3 || slices.Min(latencies) <= 0 {
		t.Errorf("latencies %v, want 6 positive", latencies)
	}
	if body < 10*50 {
		t.Errorf("last request %d bytes, want at least 10 messages of 50", body)
	}
	if own < 0 || upCPU() < cpu0 {
		t.Errorf("CPU: load %v, upstream %v → %v", own, cpu0, upCPU())
	}
}
