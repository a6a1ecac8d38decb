package tokens

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time of the calling OS thread: unlike the wall
// clock it does not count the time other processes of a shared machine take.
func threadCPU(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// TestTimeIsLinear measures, in one run, the CPU time of counting 1 MB and
// 100 KB of each adversarial input and asserts the ratio. The 100 KB text is
// counted ten times in a row per sample, so that both samples last as long
// and meet the same interference from other processes; samples alternate,
// the best of five of each is kept, the garbage collector is off and the
// thread locked. Linear time gives about 10×, with ±30 % of noise on a
// loaded 2-core machine; the bound, 15×, fails a quadratic engine (100×) by
// far. TestWorkIsLinear holds the tight bound.
func TestTimeIsLinear(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for _, name := range EncodingNames {
		enc, err := loadTestEncoding(t, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range linearInputs {
			small := in.make(100_000)
			big := strings.Repeat(small, 10)
			d1, d2 := time.Duration(1<<63-1), time.Duration(1<<63-1)
			for range 5 {
				start := threadCPU(t)
				for range 10 {
					enc.Count(small)
				}
				d1 = min(d1, (threadCPU(t)-start)/10)
				start = threadCPU(t)
				enc.Count(big)
				d2 = min(d2, threadCPU(t)-start)
			}
			ratio := float64(d2) / float64(d1)
			t.Logf("%s %s: 100 KB %v, 1 MB %v, ratio %.2f", name, in.name, d1, d2, ratio)
			if ratio > 15 {
				t.Errorf("%s %s: 1 MB takes %.1f× the time of 100 KB", name, in.name, ratio)
			}
			runtime.GC()
		}
	}
}

// TestHugeRunsMemory counts 8 MB of each repeated character and asserts that
// the count allocates under 100 MB and raises the process's peak resident
// memory by under 100 MB (the peak is reset through /proc/self/clear_refs).
func TestHugeRunsMemory(t *testing.T) {
	const size, budget = 8 << 20, 100 << 20
	for _, name := range EncodingNames {
		enc, err := loadTestEncoding(t, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, unit := range []string{" ", "a", "\n", "😀"} {
			text := strings.Repeat(unit, size/len(unit))
			runtime.GC()
			resetPeakRSS(t)
			before := peakRSS(t)
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			n := enc.Count(text)
			runtime.ReadMemStats(&m1)
			allocated, grown := m1.TotalAlloc-m0.TotalAlloc, int64(peakRSS(t))-int64(before)
			t.Logf("%s %q × 8 MB: %d tokens, %.1f MB allocated, peak RSS +%.1f MB", name, unit, n,
				float64(allocated)/(1<<20), float64(grown)/(1<<20))
			if allocated > budget || grown > budget { // grown may be a little negative: RSS is sampled
				t.Errorf("%s %q × 8 MB: allocated %d bytes, peak RSS grew %d bytes; budget %d", name, unit, allocated, grown, budget)
			}
		}
	}
}

func resetPeakRSS(t *testing.T) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset peak RSS: %v", err)
	}
}

// peakRSS returns VmHWM, the peak resident set size, in bytes.
func peakRSS(t *testing.T) uint64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}
