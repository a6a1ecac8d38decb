package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs the binary's -external roles when the tests re-execute
// the test binary as the upstream or a load client (self()), and the
// whole bench when a test runs it (GATEWAYBENCH_MAIN).
func TestMain(m *testing.M) {
	if slices.Contains(os.Args, "-role") || os.Getenv("GATEWAYBENCH_MAIN") != "" {
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
	latencies, body, own, wall := l.timed()
	if len(latencies) != 2*3 || slices.Min(latencies) <= 0 {
		t.Errorf("latencies %v, want 6 positive", latencies)
	}
	if body < 10*50 {
		t.Errorf("last request %d bytes, want at least 10 messages of 50", body)
	}
	if wall < slices.Max(latencies) {
		t.Errorf("the timed calls took %v, less than their longest, %v", wall, slices.Max(latencies))
	}
	if own <= 0 || upCPU() <= cpu0 {
		t.Errorf("CPU: load %v, upstream %v → %v", own, cpu0, upCPU())
	}
}

// slowExit is a load whose timed calls took wall in all, and whose report
// comes later (a load process's report written and its exit waited for).
type slowExit struct {
	latencies  []time.Duration
	wall, exit time.Duration
}

func (s slowExit) timed() ([]time.Duration, int, time.Duration, time.Duration) {
	time.Sleep(s.wall + s.exit)
	return s.latencies, 1, 0, s.wall
}

// TestRateOfTheTimedCalls: a cell's requests/s are its timed calls over
// the time they took, as the load measured it, not over what its report
// and its process's exit add (about 3 ms a cell with -external, a third
// of the direct 1×100 cell's 40 calls). Fails when the rate is taken over
// the bench's own wall time around the load: 10 calls in 20 ms measured
// as 10 in 60.
func TestRateOfTheTimedCalls(t *testing.T) {
	lat := slices.Repeat([]time.Duration{2 * time.Millisecond}, 10)
	m := meter{start: func(cell, string, string) load {
		return slowExit{latencies: lat, wall: 20 * time.Millisecond, exit: 40 * time.Millisecond}
	}, others: func() time.Duration { return 0 }}
	r := m.run(cell{convs: 1, messages: 2}, "", "t", false)
	if r.rate < 450 || r.rate > 500 {
		t.Errorf("%.0f requests/s for 10 calls in 20 ms, want 500", r.rate)
	}
}

// TestFailedRunStopsItsCluster: a run that fails after it started the
// throwaway PostgreSQL cluster (here a store it does not know, after
// postgres; a load process's error fails the same way) stops the cluster,
// which pg_ctl started apart from the bench. Fails without fatalf's stop:
// the cluster's postmaster.pid is left, its postmaster running (stopped
// here by its PID).
func TestFailedRunStopsItsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster (about 2 s)")
	}
	if os.Getenv("CONTEXTD_TEST_DATABASE_URL") != "" {
		t.Skip("a shared server: no cluster of the run's own")
	}
	tmp, err := os.MkdirTemp("", "gatewaybench-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil { // run as root, the cluster runs as postgres
		t.Fatal(err)
	}
	cmd := exec.Command(self(), "-stores", "postgres,nope", "-only", "^$")
	cmd.Env = append(os.Environ(), "GATEWAYBENCH_MAIN=1", "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "initdb not found") {
		if os.Getenv("CONTEXTD_REQUIRE_POSTGRES") == "1" {
			t.Fatal("PostgreSQL is required (CONTEXTD_REQUIRE_POSTGRES=1) but its binaries were not found")
		}
		t.Skip("no PostgreSQL binaries")
	}
	if err == nil || !strings.Contains(string(out), `unknown store "nope"`) {
		t.Fatalf("the run: %v\n%s", err, out)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "contextd-pg-*", "data", "postmaster.pid"))
	for _, f := range left {
		b, _ := os.ReadFile(f)
		first, _, _ := strings.Cut(string(b), "\n")
		if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGQUIT) // immediate shutdown
		}
		t.Errorf("the failed run left its cluster running: %s", f)
	}
}
