package compaction_test

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/compaction"
)

// pruneOnly is a prune-only request over an agent transcript of n messages
// (the task plus n/2 tool steps of ~200-token results) in a window that
// makes the pruner visit almost every message before it reaches the target.
func pruneOnly(n int) compaction.Request {
	b := (&builder{}).user("Fix the bug.").steps(n/2, 800, "c")
	return request(b, int64(n)*70, compaction.TierPrune)
}

func planOnce(tb testing.TB, req compaction.Request) time.Duration {
	tb.Helper()
	start := time.Now()
	plan, err := compaction.PlanCompaction(req)
	took := time.Since(start)
	if err != nil {
		tb.Fatal(err)
	}
	if !plan.Changed() || plan.TokensAfter > int64(req.Target*float64(usable(req))) {
		tb.Fatalf("prune did not reach the target: %d → %d", plan.TokensBefore, plan.TokensAfter)
	}
	return took
}

// TestPlannerLinear asserts that planning time grows linearly with the view:
// 4× the messages take at most ~6× the time (a quadratic planner takes 16×).
// Both sizes are measured in this run as CPU time of the process (collector
// included, best of five), so other processes on a busy machine do not skew
// the ratio; each size is measured with only its own view alive, so both
// see the same collector pacing.
func TestPlannerLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	cpu := func(n int) time.Duration {
		req := pruneOnly(n)
		best := time.Duration(1 << 62)
		for range 5 {
			runtime.GC()
			before := processCPU(t)
			planOnce(t, req)
			best = min(best, processCPU(t)-before)
		}
		return best
	}
	ts, tl := cpu(10_000), cpu(40_000)
	ratio := float64(tl) / float64(ts)
	t.Logf("prune-only planning, CPU time: 10k messages %v, 40k %v (×%.1f)", ts, tl, ratio)
	if ratio > 6 {
		t.Errorf("planning 4× the messages took ×%.1f the CPU time (10k %v, 40k %v); want linear (≤ 6×)", ratio, ts, tl)
	}
}

// processCPU is the CPU time this process has used.
func processCPU(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPlanPrune plans prune-only compactions of 10k, 20k and 40k
// messages; ns/op is the planning time of one view, cpu-ms/op the CPU time of
// the process (collector included) per view.
func BenchmarkPlanPrune(b *testing.B) {
	for _, n := range []int{10_000, 20_000, 40_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			req := pruneOnly(n)
			b.ReportAllocs()
			start := processCPU(b)
			for b.Loop() {
				planOnce(b, req)
			}
			// CPU time holds steadier than wall time on a shared machine.
			b.ReportMetric(float64(processCPU(b)-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}
