// Command gatewaybench measures what contextd's gateway adds to a model call
// (make bench-gateway): Chat Completions conversations sent to a local
// upstream that answers at once, directly and through contextd, for SQLite
// and PostgreSQL, 1 and 16 concurrent conversations of 100 and 1,000
// messages, one conversation whose body is about 1 MB, and one whose
// requests carry a coding agent's 30 tools (about 59 KB). Each
// conversation grows by one exchange per call, as an agent's does; the
// model is gpt-4.1 (a 1M-token window), so no cell compacts and what is
// measured is the gateway's own cost. It
// prints p50, p99, requests/s, the gateway's share of the direct rate, the
// CPU time per request (this process: client, upstream and contextd; plus
// PostgreSQL's processes; with -external the upstream's and the load
// clients' processes too) and the bytes this process allocated per request
// (with -external, contextd's alone). Before each SQLite gateway line it
// says what share of the cell's wall time the store's one write turn was
// held, per request and per group (writer.go, from contextd's /metrics).
//
// It starts what it needs: the upstream (in process; with -external a
// process of its own, as is each cell's load client: external.go),
// contextd (app.Run, always in this process: embedded SQLite in a
// temporary directory, or the cluster) and a throwaway PostgreSQL cluster
// (internal/pgtest, fsync=off: an upper bound for PostgreSQL). The profiles it can write (-cpuprofile, -blockprofile,
// -mutexprofile) cover the whole run, the direct phases too (their frames
// are the client's and the upstream's); -only narrows the run to a cell.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/pgtest"
)

// cell is one line pair of the table.
type cell struct {
	convs, messages int
	// contentBytes is the size of each message's text.
	contentBytes int
	// tools is how many tools each request declares (about 2 KB of JSON
	// each, as a coding agent's: 30 are about 60 KB).
	tools int
}

func (c cell) name() string {
	name := fmt.Sprintf("%d×%d msgs", c.convs, c.messages)
	if c.contentBytes > 1000 {
		name += fmt.Sprintf(" ~%.1f MB", float64(c.messages*c.contentBytes)/1e6)
	}
	if c.tools > 0 {
		name += fmt.Sprintf(" %d tools ~%d KB", c.tools, len(toolsJSON(c.tools))/1000)
	}
	return name
}

var cells = []cell{
	{1, 100, 250, 0}, {16, 100, 250, 0}, {1, 1000, 250, 0}, {16, 1000, 250, 0},
	{1, 200, 5000, 0}, // a 1 MB body
	{1, 100, 250, 30}, // a coding agent's tools
}

// measured is the cells with tools sent in those that declare none, each
// once: -tools 30 makes the plain 1×100 cell the one that declares 30.
func measured(tools int) []cell {
	var out []cell
	for _, c := range cells {
		if c.tools == 0 {
			c.tools = tools
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// toolsJSON is a "tools" array of n function tools of about 2 KB each
// (a description and a JSON Schema of a few parameters), as the real
// coding agents send with every request.
func toolsJSON(n int) []byte {
	type param struct {
		Type        string `json:"type"`
		Description string `json:"description"`
	}
	type function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	}
	type tool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	tools := make([]tool, n)
	for i := range tools {
		props := map[string]any{}
		for j := range 8 {
			props[fmt.Sprintf("arg_%d", j)] = param{Type: "string", Description: strings.Repeat(fmt.Sprintf("Argument %d of tool %d, as a coding agent describes it. ", j, i), 2)}
		}
		tools[i] = tool{Type: "function", Function: function{
			Name:        fmt.Sprintf("tool_%d", i),
			Description: strings.Repeat(fmt.Sprintf("Tool %d does one thing of a coding agent's, described at length for the model. ", i), 8),
			Parameters:  map[string]any{"type": "object", "properties": props, "required": []string{"arg_0"}},
		}}
	}
	b, _ := json.Marshal(tools)
	return b
}

func main() {
	stores := flag.String("stores", "sqlite,postgres", "stores to measure, comma-separated")
	calls := flag.Int("calls", 20, "timed calls per conversation in each cell (after one untimed call that creates the session)")
	only := flag.String("only", "", "measure only the cells whose name (\"sqlite 16×100 msgs\") matches this regular expression")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the gateway phases to this file")
	blockProfile := flag.String("blockprofile", "", "write a block profile of the gateway phases to this file")
	mutexProfile := flag.String("mutexprofile", "", "write a mutex profile of the gateway phases to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile (allocs: -sample_index=alloc_space) to this file")
	tools := flag.Int("tools", 0, "send this many tools (about 2 KB of JSON each, as a coding agent's: 30 is about 60 KB) with every request of the cells that declare none (the cell's name says so)")
	pgWAL := flag.Bool("pgwal", false, "PostgreSQL: also measure the WAL bytes (pg_current_wal_lsn) each gateway request wrote")
	pgXacts := flag.Bool("pgxacts", false, "PostgreSQL: also count the transactions (pg_stat_database; single statements count as one; the server's idle commits subtracted) each gateway request made; waits 11 s per reading for the statistics to be flushed")
	external := flag.Bool("external", false, "run the upstream and each cell's load client as processes of their own (this binary re-executed), over loopback TCP; contextd stays in this process")
	role := flag.String("role", "", "what -external runs this binary as: upstream or client (with -job)")
	spec := flag.String("job", "", "-role client: the cell to run, as JSON")
	flag.Parse()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	switch *role {
	case "":
	case "upstream":
		serveUpstream()
		return
	case "client":
		serveLoad(client, *calls, *spec)
		return
	default:
		fatalf("-role: unknown role %q", *role)
	}
	filter, err := regexp.Compile(*only)
	if err != nil {
		fatalf("-only: %v", err)
	}
	if *blockProfile != "" {
		runtime.SetBlockProfileRate(10_000)
	}
	if *mutexProfile != "" {
		runtime.SetMutexProfileFraction(100)
	}
	var cpuOut *os.File
	if *cpuProfile != "" {
		if cpuOut, err = os.Create(*cpuProfile); err != nil {
			fatal(err)
		}
		if err := pprof.StartCPUProfile(cpuOut); err != nil {
			fatal(err)
		}
	}
	defer stopCluster()
	// An interrupted run stops the throwaway cluster too.
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-interrupted
		stopCluster()
		os.Exit(1)
	}()
	loads := func(c cell, url, tag string) load { return newLocal(client, *calls, c, url, tag) }
	upCPU := func() time.Duration { return 0 } // in this process: counted as this process's
	up, processes := startUpstream(), "client, upstream and contextd in this process"
	if *external {
		var stop func()
		up, upCPU, stop = spawnUpstream()
		defer stop()
		loads = func(c cell, url, tag string) load { return spawnLoad(*calls, c, url, tag) }
		processes = "client, upstream and contextd each a process (-external)"
	}
	fmt.Printf("gatewaybench: %d timed calls per conversation, %d CPUs, %s, upstream answers at once; %s; PostgreSQL fsync=off\n\n",
		*calls, runtime.NumCPU(), runtime.Version(), processes)
	fmt.Println("| store | conversations × messages | body | path | p50 ms | p99 ms | requests/s | share of direct | added p50 ms | CPU ms/request | allocated/request |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, store := range strings.Split(*stores, ",") {
		env := map[string]string{}
		m := meter{start: loads, others: upCPU}
		switch store {
		case "sqlite":
		case "postgres":
			url, err := pgtest.Throwaway()
			if err != nil {
				fatalf("postgres: %v", err)
			}
			env["CONTEXTD_DATABASE_URL"] = url
			m.others = func() time.Duration { return upCPU() + pgtest.CPUTime() }
			if *pgXacts {
				// What the server commits with no requests (job sweeps,
				// retention) in one window is subtracted from each count.
				idle := transactions(url)
				idle = transactions(url) - idle
				var windows int64
				m.xacts = func() int64 { windows++; return transactions(url) - windows*idle }
			}
			if *pgWAL {
				m.wal = func() int64 { return walBytes(url) }
			}
		default:
			fatalf("-stores: unknown store %q", store)
		}
		base, writer, stop := startContextd(env, up)
		if store == "sqlite" {
			m.writer = writer
		}
		for i, c := range measured(*tools) {
			if !filter.MatchString(store + " " + c.name()) {
				continue
			}
			tag := fmt.Sprintf("%s-%d", store, i)
			direct := m.run(c, up+"/v1/chat/completions", tag+"-direct", false)
			via := m.run(c, base+"/v1/chat/completions", tag+"-gw", true)
			for _, r := range []result{direct, via} {
				share, added := "1", ""
				if r.gateway {
					share = fmt.Sprintf("%.3f", r.rate/direct.rate)
					added = fmt.Sprintf("%.2f", ms(r.p50-direct.p50))
				}
				fmt.Printf("| %s | %s | %s | %s | %.2f | %.2f | %.0f | %s | %s | %.2f | %s |\n", store, c.name(), size(r.body),
					map[bool]string{false: "direct", true: "gateway"}[r.gateway], ms(r.p50), ms(r.p99), r.rate, share, added, ms(r.cpu), size(int(r.alloc)))
			}
		}
		stop()
	}
	if cpuOut != nil {
		pprof.StopCPUProfile()
		cpuOut.Close()
	}
	for file, name := range map[string]string{*blockProfile: "block", *mutexProfile: "mutex", *memProfile: "allocs"} {
		if file == "" {
			continue
		}
		f, err := os.Create(file)
		if err != nil {
			fatal(err)
		}
		if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
			fatal(err)
		}
		f.Close()
	}
}

// stopCluster stops the throwaway PostgreSQL cluster, once (nothing when
// none was started: SQLite only, or a -role process).
var stopCluster = sync.OnceFunc(pgtest.Stop)

// fatalf and fatal are log.Fatalf and log.Fatal that stop the throwaway
// cluster first: log's exit skips main's deferred stop, and a run that
// failed (a load process's error, a store it does not know) left the
// cluster running, started by pg_ctl apart from this process
// (TestFailedRunStopsItsCluster).
func fatalf(format string, args ...any) {
	stopCluster()
	log.Fatalf(format, args...)
}

func fatal(args ...any) {
	stopCluster()
	log.Fatal(args...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func size(n int) string {
	if n >= 1e6 {
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.0f KB", float64(n)/1e3)
}

// result is one path's figures in one cell.
type result struct {
	gateway  bool
	p50, p99 time.Duration
	rate     float64       // timed calls per second of wall time
	cpu      time.Duration // CPU time per timed call
	alloc    float64       // bytes allocated in this process per timed call
	body     int           // the last request's size
}

// meter runs the cells of one store.
type meter struct {
	// start makes a cell's load (its untimed calls made): in this process,
	// or in one of its own (-external).
	start func(c cell, url, tag string) load
	// others is the CPU time so far of the processes other than this one
	// and the load's that serve the calls: PostgreSQL's, and the
	// upstream's when it runs apart. xacts, when set, counts the
	// transactions of contextd's database so far.
	others func() time.Duration
	xacts  func() int64
	// wal, when set, is the WAL position of contextd's cluster in bytes.
	wal func() int64
	// writer, when set, reads the SQLite writer's busy time (writer.go).
	writer writerMeter
}

// run measures c's conversations against url: their untimed first
// calls, then the timed calls, with the CPU of every process that serves
// them (this one, the load's and the upstream's when they are others, and
// PostgreSQL's).
func (m meter) run(c cell, url, tag string, gateway bool) result {
	l := m.start(c, url, tag)
	// The writer's counters are scraped outside the CPU and allocations
	// measured: the scrape is this process's work (contextd's registry
	// gathered and encoded, the page parsed), not the requests'.
	var busy0 writerBusy
	if m.writer != "" && gateway {
		busy0 = m.writer.read()
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var x0, w0 int64
	if m.xacts != nil && gateway {
		x0 = m.xacts()
	}
	if m.wal != nil && gateway {
		w0 = m.wal()
	}
	cpu0, others0 := cpuTime(), m.others()
	all, last, own, wall := l.timed()
	cpu := cpuTime() - cpu0 + m.others() - others0 + own
	// The WAL is read before the transactions' count, which waits 11 s:
	// what the cluster writes meanwhile (autovacuum, a checkpoint) is not
	// the requests'.
	if m.wal != nil && gateway {
		fmt.Printf("(%s: %s of PostgreSQL WAL per request)\n", tag, size(int((m.wal()-w0)/int64(len(all)))))
	}
	if m.xacts != nil && gateway {
		fmt.Printf("(%s: %.1f PostgreSQL transactions per request)\n", tag, float64(m.xacts()-x0)/float64(len(all)))
	}
	runtime.ReadMemStats(&m1)
	if m.writer != "" && gateway {
		fmt.Printf("(%s: %s)\n", tag, m.writer.read().since(busy0, wall, len(all)))
	}
	slices.Sort(all)
	n := len(all)
	return result{gateway: gateway, p50: all[n/2], p99: all[min(n-1, n*99/100)], rate: float64(n) / wall.Seconds(),
		cpu: cpu / time.Duration(n), body: last, alloc: float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n)}
}

// walBytes is url's cluster's WAL position in bytes.
func walBytes(url string) int64 {
	return queryInt(url, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`)
}

// transactions reads pg_stat_database's commits and rollbacks of url's
// database, after waiting for every backend's statistics to be flushed
// (an idle backend flushes within 10 s). This connection's own query is
// not counted: its statistics are not flushed yet.
func transactions(url string) int64 {
	time.Sleep(11 * time.Second)
	return queryInt(url, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`)
}

// queryInt is the number sql reads on a connection of its own to url.
func queryInt(url, sql string) int64 {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
		fatal(err)
	}
	return n
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startUpstream serves /v1/chat/completions on loopback: it reads the body
// and answers one fixed completion at once.
func startUpstream() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	answer := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"ok","refusal":null,"annotations":[]},"finish_reason":"stop","logprobs":null}],` +
		`"usage":{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101,"prompt_tokens_details":{"cached_tokens":0}}}`)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cpu" { // -external: the upstream process's CPU time
			fmt.Fprint(w, int64(cpuTime()))
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String()
}

// freeAddr is a loopback address free a moment ago.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startContextd runs contextd in this process (app.Run, its log
// discarded), with -external too (only the upstream and the load clients
// are processes apart): embedded SQLite in a temporary directory unless env
// names a database (CONTEXTD_DATABASE_URL), the gateway pointed at
// upstream. It returns its base URL, the writer meter of its metrics
// listener (whose counters are SQLite's: writer.go) and a stop.
func startContextd(env map[string]string, upstream string) (string, writerMeter, func()) {
	addr, metrics := freeAddr(), freeAddr()
	dir, err := os.MkdirTemp("", "gatewaybench-")
	if err != nil {
		fatal(err)
	}
	// The metrics listener (on loopback, for the writer's line) serves no
	// /debug/pprof: served, it turns on the runtime's block and mutex
	// sampling, this whole process's, for every cell (the bench's own
	// -blockprofile and -mutexprofile say when).
	all := map[string]string{"CONTEXTD_LISTEN_ADDR": addr, "CONTEXTD_DATA_DIR": dir, "CONTEXTD_METRICS_ADDR": metrics,
		"CONTEXTD_PPROF": "off", "CONTEXTD_RATE_LIMIT_RPS": "0", "CONTEXTD_OPENAI_BASE_URL": upstream + "/v1"}
	for k, v := range env {
		all[k] = v
	}
	cfg, err := app.ParseConfig(nil, func(k string) (string, bool) { v, ok := all[k]; return v, ok })
	if err != nil {
		fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil))) }()
	base := "http://" + addr
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(base + "/v1/models"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			fatal("contextd did not start")
		}
	}
	return base, writerMeter("http://" + metrics + "/metrics"), func() {
		cancel()
		if err := <-done; err != nil {
			log.Printf("contextd: %v", err)
		}
		_ = os.RemoveAll(dir)
	}
}
