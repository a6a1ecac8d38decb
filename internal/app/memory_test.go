package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// serverProcessEnv makes the test binary serve (app.Run with the
// environment's configuration) instead of running tests, so a test can read
// the peak memory of a server that is alone in its process.
const serverProcessEnv = "CONTEXTD_TEST_SERVER_PROCESS"

func serveProcess() int {
	cfg, err := ParseConfig(nil, LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := Run(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// procStatusKB reads one "VmXXX:  N kB" line of /proc/<pid>/status.
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// countMemoryBudget is the stated bound (docs/operations.md, "Limits") on how much the
// server's resident memory may grow while it counts at its limits: four
// concurrent requests of CONTEXTD_MAX_COUNT_BYTES (8 MB), with the default
// CONTEXTD_COUNT_BUDGET_BYTES (16 MB) letting two of them tokenize at once.
const countMemoryBudget = 200 << 20

// TestCountBudgetBoundsMemory runs the server as its own process, sends it
// four concurrent 8 MB CountTokens from four tenants (8 MB of one repeated
// character each, the worst case of BPE, then real transcripts), and reads the peak
// resident memory (VmHWM) the kernel recorded: it must stay within the
// stated budget above the idle server, and a fifth tenant's small calls must
// keep being answered meanwhile.
func TestCountBudgetBoundsMemory(t *testing.T) {
	addr := freeAddr(t)
	var keys []string
	for i := 1; i <= 5; i++ {
		keys = append(keys, fmt.Sprintf("t%d:k%d", i, i))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverProcessEnv+"=1", "CONTEXTD_LISTEN_ADDR="+addr, "CONTEXTD_DATA_DIR="+t.TempDir(),
		"CONTEXTD_METRICS_ADDR=", "CONTEXTD_RATE_LIMIT_RPS=0", "CONTEXTD_API_KEYS="+strings.Join(keys, ","),
		"CONTEXTD_MAX_COUNT_BYTES=8388608", "CONTEXTD_COUNT_BUDGET_BYTES=16777216", "CONTEXTD_MAX_MESSAGE_BYTES=16777216")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	conn := dial(t, addr)
	ctx := t.Context()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server process did not become healthy: %v", err)
		}
	}
	client := contextdv1.NewContextServiceClient(conn)
	small := &contextdv1.CountTokensRequest{Model: "gpt-4o", Text: "How full is my context window?"}
	for i := 1; i <= 5; i++ { // warm up every tenant's path
		if _, err := client.CountTokens(as(ctx, fmt.Sprintf("k%d", i)), small); err != nil {
			t.Fatal(err)
		}
	}
	pid := cmd.Process.Pid
	idle := procStatusKB(t, pid, "VmRSS")

	// The worst inputs for a BPE tokenizer (one 8 MB piece each) and real
	// transcripts.
	texts := []string{strings.Repeat("a", 8<<20), strings.Repeat(" ", 8<<20), strings.Repeat("\n", 8<<20),
		strings.Repeat("🙂", 8<<20/4), corpusText(t, 8<<20)}
	var wg sync.WaitGroup
	var running atomic.Int32
	running.Store(4)
	errs := make(chan error, len(texts))
	for i := 1; i <= 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			for j := i - 1; j < len(texts); j += 4 { // tenant 1 also counts the transcripts, after the others started
				if _, err := client.CountTokens(as(ctx, fmt.Sprintf("k%d", i)), &contextdv1.CountTokensRequest{Encoding: "o200k_base", Text: texts[j]}); err != nil {
					errs <- err
				}
			}
		}()
	}
	// The fifth tenant keeps calling; count the answers that arrive while
	// big counts are still running.
	answered := 0
	fifth := as(ctx, "k5")
	for running.Load() > 0 {
		if _, err := client.CountTokens(fifth, small); err != nil {
			t.Errorf("the fifth tenant's small call: %v", err)
			break
		}
		if running.Load() > 0 {
			answered++
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("an 8 MB count: %v", err)
		}
	}
	peak := procStatusKB(t, pid, "VmHWM")
	growth := (peak - idle) << 10
	t.Logf("idle RSS %d MB, peak %d MB (+%d MB; budget %d MB); %d small calls answered meanwhile",
		idle>>10, peak>>10, growth>>20, countMemoryBudget>>20, answered)
	if growth > countMemoryBudget {
		t.Errorf("peak RSS grew by %d MB, over the stated %d MB", growth>>20, countMemoryBudget>>20)
	}
	if answered < 3 {
		t.Errorf("only %d small calls of the fifth tenant were answered while the 8 MB counts ran", answered)
	}
}
