// Package ui drives the dashboard in a real headless Chromium against a
// live contextd (the binary, authentication on, embedded SQLite): the key
// prompt, the sessions table updating live from a gRPC append, the usage
// chart with one marker per compaction, and the originals behind a summary.
// Any console error or uncaught exception in the page fails the test.
//
// Chromium is Debian's (/usr/bin/chromium, or $CONTEXTD_CHROMIUM). Without
// it the test skips, unless CONTEXTD_REQUIRE_CHROMIUM=1 (CI sets it and
// installs the package). Screenshots go to $CONTEXTD_SCREENSHOT_DIR when set
// (make screenshots writes docs/'s), else to a temp dir.
package ui

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

const apiKey = "dash-key-0123456789"

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CONTEXTD_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CONTEXTD_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("chromium not found and CONTEXTD_REQUIRE_CHROMIUM=1 (apt-get install chromium)")
	}
	t.Skip("chromium not found; set CONTEXTD_REQUIRE_CHROMIUM=1 to fail instead")
	return ""
}

// server builds and starts contextd with authentication on and a small
// model, and returns its address.
func server(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "contextd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/server")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	models := filepath.Join(dir, "models.json")
	if err := os.WriteFile(models, []byte(`{"models":[{"name":"demo-8k","provider":"demo","context_window":8192,"max_output_tokens":1024,"encoding":"cl100k_base","exact":true,"pricing":{"input":3,"cached_input":0.3,"cache_write":3.75,"output":15}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	var logs bytes.Buffer
	srv := exec.Command(bin)
	srv.Env = append(os.Environ(),
		"CONTEXTD_LISTEN_ADDR="+addr, "CONTEXTD_METRICS_ADDR=", "CONTEXTD_DATA_DIR="+dir,
		"CONTEXTD_RATE_LIMIT_RPS=0", "CONTEXTD_MODELS_FILE="+models, "CONTEXTD_API_KEYS=acme:"+apiKey)
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never listened: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func text(role contextdv1.Role, s string) *contextdv1.Message {
	return &contextdv1.Message{Role: role, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: s}}}}}
}

// turn is one agent step: the assistant calls a tool, the tool answers.
func turn(i int) []*contextdv1.Message {
	id := fmt.Sprintf("call_%d", i)
	out := strings.Repeat(fmt.Sprintf("line %d of the output of step %d: internal/pkg/file_%d.go ok\n", i, i, i), 12)
	return []*contextdv1.Message{
		{Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{
			{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: fmt.Sprintf("Step %d: I will look at internal/pkg/file_%d.go.", i, i)}}},
			{Kind: &contextdv1.Part_ToolCall{ToolCall: &contextdv1.ToolCallPart{Id: id, Name: "bash", ArgumentsJson: fmt.Sprintf(`{"command":"cat internal/pkg/file_%d.go"}`, i)}}},
		}},
		{Role: contextdv1.Role_ROLE_TOOL, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolResult{ToolResult: &contextdv1.ToolResultPart{ToolCallId: id, Content: out}}}}},
	}
}

// burst is what the test made of its burst session.
type burst struct {
	last    *contextdv1.CompactionInfo
	updated time.Time
}

// burstSession fills a session in one burst, as a script would: a task and
// six tool steps, a reported model call (the ledger), a prune, two more
// steps, a summary, and the summary reverted. Its thresholds are equal
// (one threshold setup: prune and summarize at 65 %).
func burstSession(t *testing.T, ctx context.Context, api contextdv1.ContextServiceClient) burst {
	t.Helper()
	th, keep, target := 0.65, int32(4), 0.1
	if _, err := api.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "burst-1", Model: "demo-8k", SystemPrompt: "You are a careful coding agent.",
		Policy: &contextdv1.CompactionPolicy{WarningThreshold: &th, CriticalThreshold: &th, KeepRecentMessages: &keep}}); err != nil {
		t.Fatal(err)
	}
	msgs := []*contextdv1.Message{text(contextdv1.Role_ROLE_USER, "Make the build reproducible.")}
	for i := 1; i <= 6; i++ {
		msgs = append(msgs, turn(200+i)...)
	}
	if _, err := api.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "burst-1", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ReportUsage(ctx, &contextdv1.ReportUsageRequest{SessionId: "burst-1", InputTokens: 1000, CacheReadInputTokens: 3000, OutputTokens: 200}); err != nil {
		t.Fatal(err)
	}
	if r, err := api.Compact(ctx, &contextdv1.CompactRequest{SessionId: "burst-1", Tier: contextdv1.CompactionTier_COMPACTION_TIER_PRUNE, Target: &target}); err != nil || !r.GetCompacted() {
		t.Fatalf("prune: %v, %v", r, err)
	}
	if _, err := api.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "burst-1", Messages: append(turn(207), turn(208)...)}); err != nil {
		t.Fatal(err)
	}
	r, err := api.Compact(ctx, &contextdv1.CompactRequest{SessionId: "burst-1", Tier: contextdv1.CompactionTier_COMPACTION_TIER_SUMMARIZE, Target: &target})
	if err != nil || !r.GetCompacted() {
		t.Fatalf("summarize: %v, %v", r, err)
	}
	rev, err := api.RevertCompaction(ctx, &contextdv1.RevertCompactionRequest{SessionId: "burst-1", CompactionId: r.GetCompaction().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	return burst{last: &contextdv1.CompactionInfo{Round: r.GetCompaction().GetRound()}, updated: rev.GetSession().GetUpdatedAt().AsTime()}
}

// browser collects console errors and exceptions of every page.
type browser struct {
	mu     sync.Mutex
	errors []string
}

func (b *browser) listen(ctx context.Context) error {
	return chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *cdpruntime.EventConsoleAPICalled:
			if ev.Type == cdpruntime.ConsoleAPICalledTypeError || ev.Type == cdpruntime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				msg = "console." + string(ev.Type) + ": " + strings.Join(parts, " ")
			}
		case *cdpruntime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				msg = "log: " + ev.Entry.Text + " " + ev.Entry.URL
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errors = append(b.errors, msg)
			b.mu.Unlock()
		}
	})
}

func (b *browser) check(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		t.Errorf("browser console: %s", e)
	}
	b.errors = nil
}

func shotDir(t *testing.T) string {
	if d := os.Getenv("CONTEXTD_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// page wraps a chromedp tab with the few steps the test needs.
type page struct {
	t   *testing.T
	ctx context.Context
}

// newPage bounds every step of a subtest, so a page that never gets where
// the test expects fails in a minute instead of hanging.
func newPage(t *testing.T, tab context.Context) page {
	ctx, cancel := context.WithTimeout(tab, time.Minute)
	t.Cleanup(cancel)
	return page{t: t, ctx: ctx}
}

func (p page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatal(err)
	}
}

func eval[T any](p page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// until polls js until it is truthy, for at most d.
func (p page) until(js string, d time.Duration) error {
	_, err := chromedp.Run(p.ctx, chromedp.Poll[any](js, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(50*time.Millisecond)))
	return err
}

func (p page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		p.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (p page) screenshot(dir, name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}

// click clicks the first node of sel. A page that redraws between the
// node's query and the click (CDP: "Could not find node with given id")
// has the node queried again, up to three tries in all (CI met it once).
func click(sel string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		var err error
		for range 3 {
			if _, err = chromedp.Click(chromedp.CSS(sel))(ctx, t); err == nil || ctx.Err() != nil {
				break
			}
		}
		return chromedp.Void{}, err
	}
}

func enableLog(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
	_, err := cdp.Call(ctx, t, cdplog.Enable, cdp.Empty{})
	return chromedp.Void{}, err
}

// step runs one subtest and stops the test when it fails: every step
// builds on the page the one before left.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

func TestDashboardInChromium(t *testing.T) {
	exe := chromium(t)
	addr := server(t)
	base := "http://" + addr + "/ui/"
	shots := shotDir(t)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := contextdv1.NewContextServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+apiKey)

	keep := int32(4)
	if _, err := api.CreateSession(authed, &contextdv1.CreateSessionRequest{
		Id: "agent-7", Model: "demo-8k", SystemPrompt: "You are a careful coding agent.",
		Labels: map[string]string{"team": "search"},
		Policy: &contextdv1.CompactionPolicy{KeepRecentMessages: &keep},
	}); err != nil {
		t.Fatal(err)
	}
	msgs := []*contextdv1.Message{text(contextdv1.Role_ROLE_USER, "Fix the failing test in internal/pkg; the task is to make `go test ./internal/pkg` pass.")}
	for i := 1; i <= 6; i++ {
		msgs = append(msgs, turn(i)...)
	}
	if _, err := api.AppendMessages(authed, &contextdv1.AppendMessagesRequest{SessionId: "agent-7", Messages: msgs}); err != nil {
		t.Fatal(err)
	}

	// Two more sessions of the tenant, so the table has rows to tell apart.
	for i, id := range []string{"agent-3", "agent-5"} {
		if _, err := api.CreateSession(authed, &contextdv1.CreateSessionRequest{Id: id, Model: "demo-8k", SystemPrompt: "You review pull requests."}); err != nil {
			t.Fatal(err)
		}
		var ms []*contextdv1.Message
		for j := 0; j < 2+8*i; j++ {
			ms = append(ms, turn(100*(i+1)+j)...)
		}
		if _, err := api.AppendMessages(authed, &contextdv1.AppendMessagesRequest{SessionId: id, Messages: append([]*contextdv1.Message{text(contextdv1.Role_ROLE_USER, "Review the open pull request.")}, ms...)}); err != nil {
			t.Fatal(err)
		}
	}

	burst := burstSession(t, authed, api)
	// A session for a model the registry does not know: its row and page
	// carry the warning.
	if _, err := api.CreateSession(authed, &contextdv1.CreateSessionRequest{Id: "mystery-1", Model: "mystery-model-9000"}); err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx); err != nil { // start the browser, open the tab
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{}
	if err := b.listen(bctx); err != nil {
		t.Fatal(err)
	}
	p := newPage(t, bctx)
	p.do(enableLog, chromedp.EmulateViewport(1280, 800))

	step(t, "without a key the page asks for one and shows no data", func(t *testing.T) {
		p := newPage(t, bctx)
		p.do(chromedp.Navigate(base), visible("#key-form"))
		if eval[bool](p, `document.querySelector("#sessions") !== null || document.body.innerText.includes("agent-7")`) {
			t.Fatal("session data visible without an API key")
		}
		p.screenshot(shots, "dashboard-key.png")
	})

	step(t, "a wrong key is refused", func(t *testing.T) {
		p := newPage(t, bctx)
		p.do(chromedp.SetValue(chromedp.CSS("#api-key"), "not-the-key"), click(`#key-form button[type="submit"]`))
		if err := p.until(`document.querySelector("#key-why") && document.querySelector("#key-why").innerText.includes("refused")`, 10*time.Second); err != nil {
			t.Fatalf("no refusal shown: %v", err)
		}
		if eval[bool](p, `document.body.innerText.includes("agent-7")`) {
			t.Fatal("session data visible with a wrong key")
		}
	})

	var before string
	step(t, "with the key the sessions page lists the session", func(t *testing.T) {
		p := newPage(t, bctx)
		p.do(chromedp.SetValue(chromedp.CSS("#api-key"), apiKey), click(`#key-form button[type="submit"]`),
			visible(`tr[data-session="agent-7"]`), visible(`#conn[data-state="live"]`))
		before = eval[string](p, `document.querySelector('tr[data-session="agent-7"] .bar').dataset.percent`)
		if before == "" {
			t.Fatal("no bar in the row")
		}
	})

	step(t, "first load shows last compaction, spend, updated and warnings", func(t *testing.T) {
		p := newPage(t, bctx)
		// The tenant's status snapshot has arrived (live) and must not have
		// overwritten what the listing said.
		row := `tr[data-session="burst-1"]`
		last := p.text(row + ` .last`)
		if want := fmt.Sprintf("round %d · summarize", burst.last.GetRound()); !strings.Contains(last, want) || !strings.Contains(last, "reverted") {
			t.Errorf("Last compaction on first load %q; want %q, reverted", last, want)
		}
		if got := p.text(row + ` .spend`); !strings.Contains(got, "$0.0069") || !strings.Contains(got, "75 % cached") {
			t.Errorf("Spend on first load %q; want $0.0069 · 75 %% cached", got)
		}
		updated := eval[string](p, `document.querySelector('tr[data-session="burst-1"] .updated').title`)
		if at, err := time.Parse(time.RFC3339Nano, updated); err != nil || at.Sub(burst.updated).Abs() > 2*time.Millisecond {
			t.Errorf("Updated on first load is %q (%v); want the session's updated_at %s", updated, err, burst.updated)
		}
		if got := p.text(`tr[data-session="mystery-1"] .level`); !strings.Contains(got, "unknown model") {
			t.Errorf("the unknown model's row shows %q; want an unknown model warning", got)
		}
		if got := eval[string](p, `document.querySelector('tr[data-session="burst-1"] .pct').title`); !strings.Contains(got, "of the usable window") || !strings.Contains(got, "of the whole window") {
			t.Errorf("the %% used tooltip %q names neither definition", got)
		}
	})

	step(t, "an append through gRPC updates the bar live", func(t *testing.T) {
		p := newPage(t, bctx)
		if _, err := api.AppendMessages(authed, &contextdv1.AppendMessagesRequest{SessionId: "agent-7", Messages: turn(7)}); err != nil {
			t.Fatal(err)
		}
		js := fmt.Sprintf(`document.querySelector('tr[data-session="agent-7"] .bar').dataset.percent !== %q`, before)
		if err := p.until(js, 10*time.Second); err != nil {
			t.Fatalf("bar still at %s %% 10 s after the append: %v", before, err)
		}
	})

	step(t, "the ledger's spend reaches the row live", func(t *testing.T) {
		p := newPage(t, bctx)
		// 1,000 uncached + 3,000 cache reads + 200 output at $3 / $0.30 / $15
		// per million: $0.003 + $0.0009 + $0.003 = $0.0069, 75 % cached.
		if _, err := api.ReportUsage(authed, &contextdv1.ReportUsageRequest{SessionId: "agent-7", InputTokens: 1000, CacheReadInputTokens: 3000, OutputTokens: 200}); err != nil {
			t.Fatal(err)
		}
		// The next change of the session carries the ledger to watchers.
		if _, err := api.AppendMessages(authed, &contextdv1.AppendMessagesRequest{SessionId: "agent-7", Messages: []*contextdv1.Message{text(contextdv1.Role_ROLE_USER, "Also run the linter.")}}); err != nil {
			t.Fatal(err)
		}
		if err := p.until(`document.querySelector('tr[data-session="agent-7"] .spend').innerText.includes("$0.0069")`, 10*time.Second); err != nil {
			t.Fatalf("spend cell shows %q: %v", p.text(`tr[data-session="agent-7"] .spend`), err)
		}
		if got := p.text(`tr[data-session="agent-7"] .spend`); !strings.Contains(got, "75 % cached") {
			t.Errorf("spend cell %q lacks the cache hit rate", got)
		}
		p.screenshot(shots, "dashboard-sessions.png")
	})

	step(t, "the session page charts one marker per compaction and expands a summary", func(t *testing.T) {
		p := newPage(t, bctx)
		target := 0.1 // far below today's usage: both tiers have work to do
		if _, err := api.Compact(authed, &contextdv1.CompactRequest{SessionId: "agent-7", Tier: contextdv1.CompactionTier_COMPACTION_TIER_PRUNE, Target: &target}); err != nil {
			t.Fatal(err)
		}
		if _, err := api.AppendMessages(authed, &contextdv1.AppendMessagesRequest{SessionId: "agent-7", Messages: append(turn(8), turn(9)...)}); err != nil {
			t.Fatal(err)
		}
		if _, err := api.Compact(authed, &contextdv1.CompactRequest{SessionId: "agent-7", Tier: contextdv1.CompactionTier_COMPACTION_TIER_SUMMARIZE, Target: &target}); err != nil {
			t.Fatal(err)
		}
		list, err := api.ListCompactions(authed, &contextdv1.ListCompactionsRequest{SessionId: "agent-7"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Compactions) != 2 {
			t.Fatalf("scripted %d compactions, want 2", len(list.Compactions))
		}
		p.do(click(`tr[data-session="agent-7"] a`), visible(`#usage-chart svg`), visible(`#compactions tr[data-compaction]`))
		p.screenshot(shots, "dashboard-session.png")
		if n := eval[int](p, `document.querySelectorAll("#usage-chart circle.marker").length`); n != len(list.Compactions) {
			t.Fatalf("chart shows %d compaction markers, want %d", n, len(list.Compactions))
		}
		for _, c := range list.Compactions {
			if n := eval[int](p, fmt.Sprintf(`document.querySelectorAll('#usage-chart circle[data-compaction=%q]').length`, c.Id)); n != 1 {
				t.Errorf("compaction %s: %d markers", c.Id, n)
			}
		}
		// The originals behind the summary, as ExpandMessage returns them.
		var summaryID string
		for _, it := range list.Compactions[1].Items {
			if it.Tier == "summarize" {
				summaryID = it.NewMessageId
			}
		}
		if summaryID == "" {
			t.Fatal("the summarize compaction has no summary item")
		}
		exp, err := api.ExpandMessage(authed, &contextdv1.ExpandMessageRequest{SessionId: "agent-7", MessageId: summaryID})
		if err != nil {
			t.Fatal(err)
		}
		sel := fmt.Sprintf(`li[data-message=%q]`, summaryID)
		p.do(click(sel+` button.expand`), visible(sel+` .originals .original`))
		if n := eval[int](p, fmt.Sprintf(`document.querySelectorAll('%s .originals .original').length`, sel)); n != len(exp.Originals) {
			t.Fatalf("page shows %d originals, ExpandMessage returns %d", n, len(exp.Originals))
		}
		shown := eval[[]string](p, fmt.Sprintf(`[...document.querySelectorAll('%s .originals .original')].map(e => e.dataset.message)`, sel))
		for i, o := range exp.Originals {
			if shown[i] != o.Id {
				t.Errorf("original %d: page shows %s, ExpandMessage %s", i, shown[i], o.Id)
			}
		}
		p.screenshot(shots, "dashboard-expand.png")
	})

	step(t, "dry run and revert ask first and work", func(t *testing.T) {
		p := newPage(t, bctx)
		p.do(click("#dry-run-button"))
		if err := p.until(`document.querySelector("#action-result").innerText.startsWith("Dry run")`, 10*time.Second); err != nil {
			t.Fatalf("no dry-run result: %v", err)
		}
		p.do(click(`#compactions tr[data-compaction] button:not([disabled])`), visible(`#confirm[open]`), click(`#confirm-ok`))
		if err := p.until(`document.querySelector("#action-result").innerText.startsWith("Reverted")`, 10*time.Second); err != nil {
			t.Fatalf("no revert: %v (%q)", err, p.text("#action-result"))
		}
		list, err := api.ListCompactions(authed, &contextdv1.ListCompactionsRequest{SessionId: "agent-7"})
		if err != nil {
			t.Fatal(err)
		}
		if list.Compactions[1].RevertedAt == nil {
			t.Fatal("the newest compaction was not reverted")
		}
	})

	step(t, "a session filled in one burst: markers spread in event order, labels apart, bar colours by strength", func(t *testing.T) {
		p := newPage(t, bctx)
		p.do(chromedp.Navigate(base+"#/s/burst-1"), visible(`#usage-chart svg`), visible(`#compactions tr[data-compaction]`))
		eval[bool](p, `(window.scrollTo(0, 0), true)`)
		p.screenshot(shots, "dashboard-burst.png")
		// x of each marker, in event order: the two compactions, then the
		// revert of the second.
		xs := eval[[]float64](p, `[...document.querySelectorAll("#usage-chart circle.marker")].map(c => +c.getAttribute("cx")).concat([...document.querySelectorAll("#usage-chart path.revert")].map(r => +r.dataset.x))`)
		if len(xs) != 3 {
			t.Fatalf("markers at %v; want two compactions and one revert", xs)
		}
		const left, width = 64.0, 900.0 - 64 - 16
		for i, x := range xs {
			if x < left+0.05*width {
				t.Errorf("marker %d at x=%.0f is piled at the left edge (plot starts at %.0f)", i, x, left)
			}
			if i > 0 && x-xs[i-1] < 0.08*width {
				t.Errorf("markers %d and %d are %.0f apart; want at least 8 %% of the plot (%.0f) for events a burst made in order", i-1, i, x-xs[i-1], 0.08*width)
			}
		}
		labels := eval[[]string](p, `[...document.querySelectorAll("#usage-chart .th text")].map(t => t.textContent)`)
		ys := eval[[]float64](p, `[...document.querySelectorAll("#usage-chart .th text")].map(t => +t.getAttribute("y"))`)
		if !slices.Contains(labels, "prune · summarize 65 %") || len(labels) != 2 {
			t.Errorf("threshold labels %q; want the equal thresholds in one label, \"prune · summarize 65 %%\", and hand-off", labels)
		}
		for i := range ys {
			for j := range i {
				if d := ys[i] - ys[j]; d < 12 && d > -12 {
					t.Errorf("threshold labels %q and %q are %.0f px apart: they overlap", labels[j], labels[i], d)
				}
			}
		}
		if n := eval[int](p, `document.querySelectorAll("#usage-chart circle.marker title").length`); n != 2 {
			t.Errorf("%d compaction markers say their event on hover; want 2", n)
		}
		// A placeholder says where it is and what it stands in for.
		where := eval[[]string](p, `[...document.querySelectorAll('#messages li[data-kind="PLACEHOLDER"] .where')].map(e => e.textContent)`)
		if len(where) == 0 {
			t.Fatal("no placeholder in the restored view")
		}
		for _, w := range where {
			if !strings.HasPrefix(w, "view ") || !strings.Contains(w, "placeholder of ") || strings.Contains(w, "#0") {
				t.Errorf("placeholder labelled %q; want its place in the view and what it replaces", w)
			}
		}
		// Free lightest, the reserve next, used space darkest.
		lum := eval[map[string]float64](p, `(() => {
			const l = (cls) => {
				const [r, g, b] = getComputedStyle(document.querySelector("#session-bar .legend i.seg-" + cls)).backgroundColor.match(/\d+/g).map(Number).map(v => v / 255).map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
				return 0.2126 * r + 0.7152 * g + 0.0722 * b;
			};
			return Object.fromEntries(["free", "reserved", "system", "tools", "messages"].map(c => [c, l(c)]));
		})()`)
		if !(lum["free"] > lum["reserved"]) {
			t.Errorf("free space (luminance %.2f) is not lighter than the reserve (%.2f)", lum["free"], lum["reserved"])
		}
		for _, used := range []string{"system", "tools", "messages"} {
			if !(lum["reserved"] > 2*lum[used]) {
				t.Errorf("%s (luminance %.2f) is not clearly darker than the reserve (%.2f)", used, lum[used], lum["reserved"])
			}
		}
		p.do(click("#dry-run-button"))
		if err := p.until(`document.querySelector("#action-result").innerText.startsWith("Dry run")`, 10*time.Second); err != nil {
			t.Fatalf("no dry-run result: %v", err)
		}
	})

	step(t, "nothing to compact says why", func(t *testing.T) {
		p := newPage(t, bctx)
		p.do(chromedp.Navigate(base+"#/s/mystery-1"), visible(`#session-warnings li`))
		// Under load a click can land while the page is still drawn: the
		// result must come on a click, not necessarily on the first.
		for attempt := 1; ; attempt++ {
			p.do(click("#dry-run-button"))
			err := p.until(`!!document.querySelector("#nothing-to-compact")`, 15*time.Second)
			if err == nil {
				break
			}
			shown := eval[string](p, `document.querySelector("#action-result")?.innerText ?? "(no #action-result)"`)
			if attempt == 3 {
				t.Fatalf("no nothing-to-compact reason after %d clicks; the page shows %q", attempt, shown)
			}
			t.Logf("click %d: no reason yet; the page shows %q", attempt, shown)
		}
		if got := p.text("#nothing-to-compact"); !strings.Contains(got, "the active view is empty") {
			t.Errorf("dry run on an empty session says %q; want the reason", got)
		}
		if got := p.text("#session-warnings"); !strings.Contains(got, "not in the registry") {
			t.Errorf("session page warnings %q; want the unknown model", got)
		}
	})

	step(t, "readable on a narrow window and keyboard reachable", func(t *testing.T) {
		p := newPage(t, bctx)
		p.do(chromedp.EmulateViewport(400, 800), chromedp.Navigate(base+"#/"), visible(`tr[data-session="agent-7"]`))
		if eval[bool](p, `document.documentElement.scrollWidth > window.innerWidth + 1`) {
			t.Error("the sessions page scrolls sideways at 400 px")
		}
		if n := eval[int](p, `[...document.querySelectorAll("a[href], button, input")].filter(e => e.tabIndex >= 0 && !e.disabled && e.offsetParent !== null).length`); n < 3 {
			t.Errorf("only %d keyboard-reachable controls", n)
		}
		p.screenshot(shots, "dashboard-narrow.png")
	})

	b.check(t)
}
