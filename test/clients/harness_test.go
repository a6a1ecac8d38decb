package clients

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/app/apptest"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/tokens"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// require returns the path of a command, skipping when it is missing
// unless CONTEXTD_REQUIRE_NODE=1 (CI) makes that a failure.
func require(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CONTEXTD_REQUIRE_NODE") == "1" {
			t.Fatalf("%s is required (CONTEXTD_REQUIRE_NODE=1): %v", name, err)
		}
		t.Skipf("%s not found: %v", name, err)
	}
	return p
}

var installOnce sync.Once

// clis returns test/clients/node with its pinned CLIs installed (npm ci
// when node_modules is missing; `make test-clients` runs it first). The
// suite downloads about 1 GB and runs for minutes, so it runs when
// CONTEXTD_TEST_CLIENTS=1 asks (make test-clients, which CI runs); with
// it, a missing node or npm fails under CONTEXTD_REQUIRE_NODE=1.
func clis(t *testing.T) string {
	t.Helper()
	if os.Getenv("CONTEXTD_TEST_CLIENTS") != "1" {
		t.Skip("the real agent CLIs run with make test-clients (CONTEXTD_TEST_CLIENTS=1)")
	}
	require(t, "node")
	npm := require(t, "npm")
	wd, _ := os.Getwd()
	dir := filepath.Join(wd, "node")
	var failure string
	installOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			failure = fmt.Sprintf("npm ci in %s: %v\n%s", dir, err, out)
		}
	})
	if failure != "" {
		if os.Getenv("CONTEXTD_REQUIRE_NODE") == "1" {
			t.Fatal(failure)
		}
		t.Skip(failure + " (is the npm registry reachable?)")
	}
	return dir
}

// exchange is one request a client made to contextd, as the recording
// proxy in front of contextd saw it.
type exchange struct {
	conv    string // the conversation the test was running
	path    string
	status  int
	session string // X-Contextd-Session of the answer
	history string
	used    float64 // X-Contextd-Used-Percent, -1 when absent
	fresh   bool    // X-Contextd-Compacted: true — the view was compacted for this request
	main    bool    // the request carries a TASK= prompt and tools (the agent loop, not a title or a check)
	header  http.Header
	// seq is the exchange's number, sent on to contextd as
	// X-Test-Exchange, which contextd passes upstream: the provider's
	// calls of this exchange carry it.
	seq string
	// body is the request's body when contextd refused it (dump).
	body []byte
	// unreached: contextd could not be reached (a restart), the proxy
	// answered 502.
	unreached bool
}

// rig is contextd with the scripted provider behind it and a recording
// proxy in front of it; the CLIs talk to the proxy.
type rig struct {
	t        *testing.T
	provider *Provider
	addr     string // contextd
	front    string // the recording proxy's base URL
	window   int64

	mu        sync.Mutex
	conv      string
	seq       int
	exchanges []exchange
	// handling counts the front's requests not yet recorded (settled
	// waits for them).
	handling sync.WaitGroup
	// outbound are the requests that tried to leave loopback (through
	// HTTPS_PROXY, which the CLIs get): what a test without network
	// would hang on.
	outbound []string
	outProxy string
	registry string // a loopback npm registry without packages (opencode)
	// accent ends every prompt the conversations type (non-ASCII words,
	// emoji); env is added to every CLI's environment.
	accent string
	env    []string
	// restart stops contextd and starts it again on the same data
	// directory; between, when set, runs between the conversations'
	// first and second turns.
	restart func()
	between func()
	// addReplica starts another contextd on the same store (PostgreSQL):
	// the recording proxy sends the requests round-robin to contextd and
	// its replicas; turns counts the requests sent.
	// alongside: the CLIs run at the same time (runAlongside), each
	// naming its conversation in its base URL.
	alongside  bool
	addReplica func()
	replicas   []string
	turns      int
	// served counts the answers of status 200 by the contextd address
	// that gave them (a replica that never answered is a variation that
	// did not run).
	served map[string]int
}

// model is the registry entry the suite adds (CONTEXTD_MODELS_FILE): a
// window small enough that 30 rounds compact several times.
type model struct {
	Name          string `json:"name"`
	Provider      string `json:"provider"`
	ContextWindow int64  `json:"context_window"`
	MaxOutput     int64  `json:"max_output_tokens"`
	Encoding      string `json:"encoding"`
	Exact         bool   `json:"exact"`
	// Framing, when set, is how the provider frames a request (the
	// models file's framing).
	Framing *tokens.Framing `json:"framing,omitempty"`
}

func startRig(t *testing.T, m model, env map[string]string) *rig {
	t.Helper()
	enc, err := tokens.LoadEncoding(m.Encoding)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProvider(enc, m.ContextWindow)
	t.Cleanup(p.Close)
	modelsFile := filepath.Join(t.TempDir(), "models.json")
	b, _ := json.Marshal(map[string]any{"models": []model{m}})
	if err := os.WriteFile(modelsFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{
		"CONTEXTD_OPENAI_BASE_URL":    p.URL() + "/v1",
		"CONTEXTD_ANTHROPIC_BASE_URL": p.URL(),
		"CONTEXTD_MODELS_FILE":        modelsFile,
	}
	for k, v := range env {
		all[k] = v
	}
	if all["CONTEXTD_DATA_DIR"] == "" {
		all["CONTEXTD_DATA_DIR"] = t.TempDir() // kept across restart
	}
	r := &rig{t: t, provider: p, window: m.ContextWindow}
	var stop func()
	r.addr, stop = apptest.StartStoppable(t, all)
	t.Cleanup(func() { stop() })
	r.addReplica = func() {
		addr := apptest.Start(t, all)
		r.mu.Lock()
		r.replicas = append(r.replicas, addr)
		r.mu.Unlock()
	}
	var restarting sync.Mutex // the restart in the middle of a turn and the one between turns
	r.restart = func() {
		restarting.Lock()
		defer restarting.Unlock()
		stop()
		addr, stopNew := apptest.StartStoppable(t, all)
		r.mu.Lock()
		r.addr, stop = addr, stopNew
		r.mu.Unlock()
	}
	r.startFront()
	r.startOutProxy()
	return r
}

// startFront starts the recording proxy in front of contextd.
func (r *rig) startFront() {
	// The target is read at each request: contextd may have restarted
	// on another port (restart), and the requests go round-robin to the
	// replicas (addReplica).
	rp := &httputil.ReverseProxy{FlushInterval: -1, Director: func(req *http.Request) {
		r.mu.Lock()
		addrs := append([]string{r.addr}, r.replicas...)
		req.URL.Scheme, req.URL.Host = "http", addrs[r.turns%len(addrs)]
		r.turns++
		r.mu.Unlock()
	}, ModifyResponse: func(resp *http.Response) error {
		if resp.StatusCode == http.StatusOK {
			r.mu.Lock()
			if r.served == nil {
				r.served = map[string]int{}
			}
			r.served[resp.Request.URL.Host]++
			r.mu.Unlock()
		}
		return nil
	}, ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
		// contextd could not be reached (stopped for a restart): the
		// client gets a 502 as from a load balancer, recorded as
		// unreached.
		w.(*recorder).unreached = true
		w.WriteHeader(http.StatusBadGateway)
	}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		r.mu.Lock()
		r.seq++
		seq := strconv.Itoa(r.seq)
		conv := r.conv
		r.mu.Unlock()
		req.Header.Set(headerExchange, seq)
		// A CLI run by runAlongside names its conversation in its base
		// URL's path (/c/LABEL/...): passed on as headerConv.
		if rest, ok := strings.CutPrefix(req.URL.Path, "/c/"); ok {
			label, path, _ := strings.Cut(rest, "/")
			conv, req.URL.Path = label, "/"+path
			req.Header.Set(headerConv, label)
		}
		rec := &recorder{ResponseWriter: w}
		r.handling.Add(1)
		defer r.handling.Done() // after the exchange is recorded (below)
		// Recorded even when the client hangs up mid-stream (the
		// reverse proxy then panics with http.ErrAbortHandler).
		defer func() {
			h := rec.Header()
			used := -1.0
			if v := h.Get("X-Contextd-Used-Percent"); v != "" {
				used, _ = strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
			}
			var decoded struct {
				Tools []json.RawMessage `json:"tools"`
			}
			_ = json.Unmarshal(body, &decoded)
			main := bytes.Contains(body, []byte("TASK=")) && len(decoded.Tools) > 0
			r.mu.Lock()
			r.exchanges = append(r.exchanges, exchange{conv: conv, path: req.URL.Path, status: rec.status,
				session: h.Get("X-Contextd-Session"), history: h.Get("X-Contextd-History"), used: used, fresh: h.Get("X-Contextd-Compacted") == "true", main: main, header: req.Header.Clone(), seq: seq, body: refusedBody(rec.status, body), unreached: rec.unreached})
			r.mu.Unlock()
		}()
		rp.ServeHTTP(rec, req)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	r.t.Cleanup(func() { srv.Close() })
	r.front = "http://" + l.Addr().String()
}

type recorder struct {
	http.ResponseWriter
	status    int
	unreached bool // the proxy could not reach contextd
}

func (r *recorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}
func (r *recorder) Flush() { r.ResponseWriter.(http.Flusher).Flush() }

// startOutProxy starts the proxy the CLIs get as HTTP(S)_PROXY: it
// records every attempt to reach beyond loopback and refuses it at once.
func (r *rig) startOutProxy() {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.outbound = append(r.outbound, r.conv+": "+req.Method+" "+req.Host+req.URL.Path)
		r.mu.Unlock()
		http.Error(w, "no network in this test", http.StatusForbidden)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	r.t.Cleanup(func() { srv.Close() })
	r.outProxy = "http://" + l.Addr().String()
}

// baseEnv is the environment every CLI runs with: a home of its own, no
// network beyond loopback (proxies that refuse and record), no color.
func (r *rig) baseEnv(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=dumb", "NO_COLOR=1", "LANG=C.UTF-8",
		"HTTPS_PROXY=" + r.outProxy, "HTTP_PROXY=" + r.outProxy, "https_proxy=" + r.outProxy, "http_proxy=" + r.outProxy,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	}
}

// run runs one turn of conversation conv: the command in dir, with env,
// under a deadline; it returns stdout and fails the test on a non-zero
// exit.
func (r *rig) run(conv, dir string, env []string, name string, args ...string) string {
	r.t.Helper()
	r.mu.Lock()
	alongside := r.alongside
	if !alongside {
		r.conv = conv
	}
	r.mu.Unlock()
	if alongside {
		// The conversation is named in the base URL (startFront).
		labelled := make([]string, len(env))
		for i, e := range env {
			labelled[i] = strings.ReplaceAll(e, r.front, r.front+"/c/"+conv)
		}
		env = labelled
		args = slices.Clone(args)
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, r.front, r.front+"/c/"+conv)
		}
	} else {
		r.provider.SetConv(conv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, append(env, r.env...)
	// Stdout is a file, not a pipe: Node.js CLIs that exit right after a
	// large write lose the tail of what they wrote to a pipe.
	outFile, err := os.CreateTemp(r.t.TempDir(), "stdout")
	if err != nil {
		r.t.Fatal(err)
	}
	defer outFile.Close()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = outFile, &stderr
	cmd.Stdin = strings.NewReader("")
	// At the deadline the whole process group goes, not only the node
	// wrapper: Codex's native binary, left behind, held stderr's pipe
	// open, and the turn waited for it (and it went on calling the
	// gateway) past the deadline.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err = cmd.Run()
	out, _ := os.ReadFile(outFile.Name())
	stdout := bytes.NewBuffer(out)
	r.t.Logf("%s: %s %s: %v in %v", conv, filepath.Base(name), strings.Join(args[:min(2, len(args))], " "), err, time.Since(start).Round(time.Millisecond))
	if err != nil {
		r.t.Errorf("%s: %s: %v\nstdout:\n%s\nstderr:\n%s", conv, filepath.Base(name), err, tail(stdout.String()), tail(stderr.String()))
	}
	return stdout.String()
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// newWorkspace makes a directory with the files the script reads and
// edits.
func newWorkspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for i := range WorkspaceFiles {
		var b strings.Builder
		for j := range 60 {
			fmt.Fprintf(&b, "part %d line %d: config value alpha=%d beta=%d gamma=%d, checked and recorded\n", i, j, i*j, i+j, j*j)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d.txt", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("Notes of the checks.\n"+EditMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// prompt is a human prompt: the TASK/ROUNDS/DIR markers drive the
// scripted model; the words after them are what a person typed.
func prompt(task string, rounds int, dir, words string) string {
	return fmt.Sprintf("TASK=%s ROUNDS=%d DIR=%s %s", task, rounds, dir, words)
}

// rpc calls one of contextd's RPCs over Connect (HTTP/JSON).
func (r *rig) rpc(method string, req, out any) {
	r.t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post("http://"+r.addr+"/contextd.v1.ContextService/"+method, "application/json", bytes.NewReader(b))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("%s: %d %s", method, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		r.t.Fatalf("%s: %v: %s", method, err, body)
	}
}

// refusedBody is body when status is a refusal, else nil.
func refusedBody(status int, body []byte) []byte {
	if status >= 400 {
		return body
	}
	return nil
}

// settled waits until every exchange the front has answered is recorded,
// so that a check right after a run never reads the exchanges while a
// handler is still recording one. (CI met once, under load, a
// provider-answered call with no answer recorded for it; this is one
// possible cause, not a confirmed one: the server sends a response's last
// bytes only after its handler returns. The check logs what the client got
// for such a call.)
func (r *rig) settled(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { r.handling.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Error("the front's handlers did not end within a minute of the last run")
	}
}
