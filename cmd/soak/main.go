// Command soak runs contextd the way production will, for a while, and
// proves nothing was lost: a throwaway PostgreSQL, N replicas of the real
// binary (go build ./cmd/server) on loopback ports, a fault-injecting fake
// provider (5xx, 429 with retry-after, hangs, dropped streams, slow
// summaries) and M simulated agents that replay the corpus's transcripts
// through the gateway's three doors and through the gRPC API (PrepareContext
// and ReportUsage, ExpandMessage, RevertCompaction, ClearMessages,
// WatchContextStatus), retrying as the SDKs do. Faults on a schedule:
// kill -9 of a replica every minute (restarted after a few seconds), one
// PostgreSQL restart, a replica paused (SIGSTOP) past its job leases, a
// watcher that stops reading.
//
// A checker then reads every session back (at checkpoints and at the end)
// and verifies what the agents saw acknowledged (docs/operations.md, "Soak
// test"). The last line is
//
//	soak: <operations> operations, <faults> faults, lost 0, duplicated 0, invalid 0, stuck 0, leaked 0
//
// and the exit status is non-zero when any count is not 0. `make soak` runs
// 30 minutes, `make soak-short` 3.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

type options struct {
	duration    time.Duration
	replicas    int
	agents      int
	killEvery   time.Duration
	killPause   time.Duration
	lease       time.Duration
	sampleEvery time.Duration
	think       time.Duration
	rates       faultRates
	out         string
	bin         string
	keep        bool
}

// faultEvent is one scheduled fault, for the report and the plot.
type faultEvent struct {
	at   time.Duration
	what string
}

type soak struct {
	opt      options
	pg       *postgres
	procs    *procs
	replicas []*replica
	clients  []contextdv1.ContextServiceClient
	conns    []*grpc.ClientConn
	provider *provider
	http     *http.Client
	rep      *report
	hist     *history
	sent     sentContent
	corpus   [][]string
	gw       *gatewayAgents
	api      *apiAgents
	sampler  *sampler
	// unreported counts model calls whose ReportUsage never got an
	// answer (the ledger may lack them).
	unreported atomic.Int64
	// unrecordedAtKill counts gateway conversations whose last
	// acknowledged reply is missing, a replica killed just after it.
	unrecordedAtKill atomic.Int64
	// restarts are the kills' restarts still running: the final checks
	// wait for them.
	restarts sync.WaitGroup
	// stopping: cleanup has begun (the replicas it kills did not crash).
	stopping atomic.Bool
	// watchCtx ends after the final checks: the watchers outlive the
	// agents.
	watchCtx context.Context

	mu     sync.Mutex
	events []faultEvent
	kills  []time.Time
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 3*time.Minute, "how long the agents run (the checks follow)")
	flag.IntVar(&o.replicas, "replicas", 3, "contextd replicas on one PostgreSQL")
	flag.IntVar(&o.agents, "agents", 24, "simulated agents: a third through the API, the rest through the gateway's three doors")
	flag.DurationVar(&o.killEvery, "kill-every", time.Minute, "kill -9 a replica this often (0: never)")
	flag.DurationVar(&o.killPause, "kill-pause", 3*time.Second, "a killed replica is restarted after this long")
	flag.DurationVar(&o.lease, "lease", 5*time.Second, "the replicas' CONTEXTD_COMPACTION_LEASE; the paused replica stays stopped twice as long")
	flag.DurationVar(&o.sampleEvery, "sample-every", 10*time.Second, "resource sampling interval")
	flag.DurationVar(&o.think, "think", 300*time.Millisecond, "an agent's mean pause between calls")
	flag.Float64Var(&o.rates.Fail, "fail-rate", 0.05, "share of provider requests answered 5xx")
	flag.Float64Var(&o.rates.Throttle, "throttle-rate", 0.03, "share answered 429 with retry-after: 1")
	flag.Float64Var(&o.rates.Hang, "hang-rate", 0.005, "share that hang until the caller gives up")
	flag.Float64Var(&o.rates.Drop, "drop-rate", 0.03, "share of streamed requests cut after the headers")
	flag.Float64Var(&o.rates.SlowSummary, "slow-summary-rate", 0.3, "share of summaries delayed 2 to 6 s")
	flag.StringVar(&o.out, "out", "build/soak", "directory for the logs, the table and the plot")
	flag.StringVar(&o.bin, "bin", "", "contextd binary to run (default: go build ./cmd/server into -out)")
	flag.BoolVar(&o.keep, "keep", false, "keep the replicas' logs in -out after a passing run")
	flag.Parse()
	os.Exit(run(o))
}

func run(o options) (code int) {
	ps := newProcs()
	s := &soak{opt: o, procs: ps, rep: newReport(), hist: newHistory()}
	// Whatever happens, every process we started ends.
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "soak: panic: %v\n%s", p, debug.Stack())
			code = 2
		}
		s.cleanup()
	}()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := s.setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "soak: setup:", err)
		return 2
	}
	faults := s.drive(ctx)
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "soak: interrupted")
		return 2
	}
	s.rep.writeLatencies(os.Stdout)
	fmt.Println()
	s.sampler.writeTable(os.Stdout)
	fmt.Println()
	s.rep.writeProblems(os.Stdout)
	png := filepath.Join(o.out, "soak.png")
	if err := s.sampler.plot(png, s.rep, max(o.duration/30, 5*time.Second), s.events); err != nil {
		fmt.Fprintln(os.Stderr, "soak: plot:", err)
	} else {
		fmt.Println("plot:", png)
	}
	fmt.Println(s.rep.lastLine(faults))
	if n := s.rep.counts(); n != [classes]int{} {
		fmt.Fprintf(os.Stderr, "soak: failed; the replicas' logs are in %s\n", o.out)
		return 1
	}
	if !o.keep {
		for i := range s.replicas {
			_ = os.Remove(filepath.Join(o.out, fmt.Sprintf("replica%d.log", i)))
		}
	}
	return 0
}

// guard ends the whole run, cleaning up, when a goroutine of ours panics
// (a deferred recover in main does not see other goroutines' panics).
// Every goroutine the soak starts defers it.
func (s *soak) guard() {
	if p := recover(); p != nil {
		fmt.Fprintf(os.Stderr, "soak: panic: %v\n%s", p, debug.Stack())
		s.cleanup()
		os.Exit(2)
	}
}

// crashed counts a replica that ended without the soak killing it.
func (s *soak) crashed(r *replica, err error) {
	if s.stopping.Load() {
		return
	}
	s.rep.problem(stuck, "replica %d exited by itself (%v): see %s", r.n, err, filepath.Join(r.logDir, fmt.Sprintf("replica%d.log", r.n)))
}

func (s *soak) cleanup() {
	s.stopping.Store(true)
	for _, c := range s.conns {
		_ = c.Close()
	}
	// PostgreSQL first, by pg_ctl (killing its postmaster first would
	// leave its backends to notice alone), then every process left.
	if s.pg != nil {
		s.pg.stop()
	}
	s.procs.killAll()
	if s.provider != nil {
		s.provider.close()
	}
}

func (s *soak) think(ctx context.Context) {
	sleepCtx(ctx, time.Duration(rand.Int64N(int64(2*s.opt.think)+1)))
}

func (s *soak) event(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := time.Since(s.rep.start)
	s.events = append(s.events, faultEvent{at: at, what: what})
	fmt.Printf("%8s  fault: %s\n", at.Round(time.Second), what)
}

// models registers the soak's models with small windows, so that the
// transcripts fill them and compaction (summaries by the fake provider,
// in background jobs) runs all the time.
const models = `{"models": [
  {"name": "soak-gpt", "provider": "openai", "context_window": 6144, "max_output_tokens": 512, "encoding": "o200k_base", "exact": false, "expected_error": 0.2,
   "pricing": {"input": 2.5, "cached_input": 1.25, "cache_write": 2.5, "output": 10}},
  {"name": "soak-claude", "provider": "anthropic", "context_window": 6144, "max_output_tokens": 512, "encoding": "cl100k_base", "exact": false, "expected_error": 0.2,
   "pricing": {"input": 3, "cached_input": 0.3, "cache_write": 3.75, "output": 15}}
]}`

func (s *soak) setup(ctx context.Context) error {
	o := s.opt
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	out, _ := filepath.Abs(o.out)
	corpus, err := loadCorpus("testdata/corpus/dev")
	if err != nil {
		return err
	}
	s.corpus = corpus
	bin := o.bin
	if bin == "" {
		bin = filepath.Join(out, "contextd")
		fmt.Println("soak: go build ./cmd/server")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/server")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build: %w", err)
		}
	}
	fmt.Println("soak: starting PostgreSQL")
	if s.pg, err = startPostgres(s.procs); err != nil {
		return err
	}
	s.provider = newProvider(o.rates)
	s.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}
	modelsFile := filepath.Join(out, "models.json")
	if err := os.WriteFile(modelsFile, []byte(models), 0o644); err != nil {
		return err
	}
	for i := range o.replicas {
		port, err := freePort()
		if err != nil {
			return err
		}
		mport, err := freePort()
		if err != nil {
			return err
		}
		r := &replica{n: i, addr: fmt.Sprintf("127.0.0.1:%d", port), metrics: fmt.Sprintf("127.0.0.1:%d", mport), logDir: out, bin: bin, procs: s.procs,
			exited: s.crashed}
		r.env = append(os.Environ(),
			"CONTEXTD_LISTEN_ADDR="+r.addr, "CONTEXTD_METRICS_ADDR="+r.metrics,
			"CONTEXTD_DATABASE_URL="+s.pg.url(), "CONTEXTD_LOG_LEVEL=warn", "CONTEXTD_UI=false",
			"CONTEXTD_RATE_LIMIT_RPS=0", "CONTEXTD_MODELS_FILE="+modelsFile,
			"CONTEXTD_OPENAI_BASE_URL="+s.provider.openAIBase(), "CONTEXTD_ANTHROPIC_BASE_URL="+s.provider.anthropicBase(),
			"CONTEXTD_OPENAI_API_KEY=sk-soak-summarizer", "CONTEXTD_SUMMARIZER=openai:"+summarizerModel,
			"CONTEXTD_SUMMARIZER_TIMEOUT=10s", "CONTEXTD_COMPACTION_LEASE="+o.lease.String(),
			"CONTEXTD_VIEW_CACHE_BYTES=8388608", "CONTEXTD_GATEWAY_MEMO_BYTES=8388608", "CONTEXTD_SHUTDOWN_TIMEOUT=2s",
			"CONTEXTD_DATA_DIR="+filepath.Join(out, fmt.Sprintf("data%d", i)),
		)
		s.replicas = append(s.replicas, r)
	}
	fmt.Printf("soak: starting %d replicas\n", o.replicas)
	// The first migrates alone; the others start together.
	if err := s.replicas[0].start(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(s.replicas))
	for _, r := range s.replicas[1:] {
		wg.Add(1)
		go func() { defer s.guard(); defer wg.Done(); errs <- r.start(ctx) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	for _, r := range s.replicas {
		cc, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		s.conns = append(s.conns, cc)
		s.clients = append(s.clients, contextdv1.NewContextServiceClient(cc))
	}
	s.gw = &gatewayAgents{s: s}
	s.api = &apiAgents{s: s}
	s.sampler = &sampler{s: s}
	return nil
}
