package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/summarize"
	"github.com/contextd/contextd/internal/telemetry"
)

// gateLLM is a local server speaking OpenAI's chat completions wire format
// whose answers wait while its gate is shut; each answer is a summary
// numbered by its request ("LLM summary 3"), so a test can tell which call
// wrote the summary a compaction applied.
type gateLLM struct {
	mu       sync.Mutex
	gate     chan struct{} // nil: open
	arrivals chan int
	delay    time.Duration
	n        atomic.Int64
}

func newGateLLM(t *testing.T) (*gateLLM, *summarize.Set) {
	g := &gateLLM{arrivals: make(chan int, 100)}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	set, err := summarize.NewSet("extractive", map[string]summarize.Endpoint{summarize.ProviderOpenAI: {
		BaseURL: srv.URL + "/v1/", APIKey: "k", Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return g, set
}

func (g *gateLLM) shut() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gateLLM) open() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

func (g *gateLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(g.n.Add(1))
	_, _ = io.Copy(io.Discard, r.Body)
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	select {
	case g.arrivals <- n:
	default:
	}
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	if g.delay > 0 {
		time.Sleep(g.delay)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": fmt.Sprintf("## Original task\nLLM summary %d\n## Current state\nworking", n)}}},
		"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
	})
}

// bgReplicas builds n engines over one store, as replicas of one deployment,
// each with background workers running until the test ends.
func bgReplicas(t *testing.T, st store.Store, set *summarize.Set, n int, workers int) []*engine.Engine {
	models, encodings := testModels(t)
	var out []*engine.Engine
	for range n {
		e := engine.New(encodings, models, st, engine.WithSummarizers(set), engine.WithBackground(engine.Background{
			Enabled: true, Workers: workers, Lease: time.Second, Poll: 20 * time.Millisecond}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); e.RunJobs(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		out = append(out, e)
	}
	return out
}

// llmSession is a gpt-4 session (8k window) summarized by the fake LLM,
// past its critical level (about 89 % of the usable window): it needs a
// summary, and pruning cannot help (every result is protected).
func llmSession(t *testing.T, e *engine.Engine) engine.SessionView { return llmSessionID(t, e, "") }

func llmSessionID(t *testing.T, e *engine.Engine, id string) engine.SessionView {
	t.Helper()
	spec, keep, off := "openai:gpt-4o-mini", 1000, 0
	return agentSessionID(t, e, id, compaction.Overrides{Summarizer: &spec, ProtectRecentToolResults: &keep, CachePaybackCalls: &off}, 19)
}

// waitJob waits until the session's job is in state want (or gone, for "").
func waitJob(t *testing.T, st store.Store, id string, want store.JobState) store.Job {
	t.Helper()
	for range 1000 {
		j, err := st.GetJob(t.Context(), tenant, id)
		switch {
		case errors.Is(err, store.ErrNotFound) && want == "":
			return j
		case err == nil && j.State == want:
			return j
		case err != nil && !errors.Is(err, store.ErrNotFound):
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	j, err := st.GetJob(t.Context(), tenant, id)
	t.Fatalf("job of %s never reached %q: %+v, %v", id, want, j, err)
	return j
}

func step(i int) []chat.Message {
	id := fmt.Sprintf("more_%d", i)
	return []chat.Message{callMsg(id), resultMsg(id, fmt.Sprintf("more %d: %s", i, strings.Repeat("sit amet ", 20)))}
}

func compactions(t *testing.T, e *engine.Engine, id string) []store.Compaction {
	t.Helper()
	list, err := compactionsOf(e, t.Context(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestBackgroundCompaction: a call that needs an LLM summary does not wait
// for it (the LLM is held shut the whole time); the job is planned in the
// background and applied by the next call, which keeps what was appended
// after the plan; the job row is gone once applied.
func TestBackgroundCompaction(t *testing.T) {
	backendStores(t, func(t *testing.T, st store.Store) {
		llm, set := newGateLLM(t)
		e := bgReplicas(t, st, set, 1, 1)[0]
		ctx := t.Context()
		v := llmSession(t, e)
		llm.shut()
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Compacted || !strings.Contains(strings.Join(res.Status.Warnings, " "), "prepared in the background") {
			t.Fatalf("the call compacted or did not say it waits for the background: %+v", res.Status)
		}
		<-llm.arrivals // the job's summary is being written, and held
		if j := waitJob(t, st, v.ID, store.JobRunning); j.Attempts != 1 {
			t.Fatalf("job %+v", j)
		}
		// Calls go on meanwhile, appending, without waiting.
		res, err = e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: step(0)})
		if err != nil || res.Status.Compacted {
			t.Fatalf("second call: %+v, %v", res.Status, err)
		}
		llm.open()
		waitJob(t, st, v.ID, store.JobReady)
		res, err = e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: step(1)})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Status.Compacted || res.Status.LastCompaction == nil || !strings.Contains(res.Status.LastCompaction.Summary, "LLM summary 1") {
			t.Fatalf("the prepared result was not applied: %+v", res.Status)
		}
		if res.Status.Usage.Level >= compaction.LevelCompact {
			t.Errorf("after the prepared compaction the session is still at level %v", res.Status.Usage.Level)
		}
		// Both appends after the plan follow the compacted view, in order.
		tail := res.Messages[len(res.Messages)-4:]
		for i, want := range []string{"more_0", "more_0", "more_1", "more_1"} {
			if !strings.Contains(fmt.Sprint(tail[i].Parts[0].ToolCall, tail[i].Parts[0].ToolResult), want) {
				t.Errorf("view tail %d = %+v; want %s", i, tail[i].Parts[0], want)
			}
		}
		if _, err := st.GetJob(ctx, tenant, v.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the applied job is still stored: %v", err)
		}
		if n := len(compactions(t, e, v.ID)); n != 1 {
			t.Errorf("%d compactions; want 1", n)
		}
		if n := llm.n.Load(); n != 1 {
			t.Errorf("%d LLM calls; want 1 (no call planned its own)", n)
		}
	})
}

// deadStore is a replica's store once the replica has died: every write
// fails (its lease can be neither renewed nor handed back).
type deadStore struct {
	store.Store
	dead atomic.Bool
}

func (d *deadStore) InTx(ctx context.Context, fn func(context.Context, store.Tx) error) error {
	if d.dead.Load() {
		return errors.New("replica is dead")
	}
	return d.Store.InTx(ctx, fn)
}

// TestBackgroundJobOfDeadReplica: a replica dies while its worker holds a
// job; once the lease lapses another replica's worker takes the job and
// finishes it, and the dead one's late result is never stored.
func TestBackgroundJobOfDeadReplica(t *testing.T) {
	backendStores(t, func(t *testing.T, st store.Store) {
		llm, set := newGateLLM(t)
		dying := &deadStore{Store: st}
		a := bgReplicas(t, dying, set, 1, 1)[0]
		ctx := t.Context()
		v := llmSession(t, a)
		llm.shut()
		if _, err := a.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{}); err != nil {
			t.Fatal(err)
		}
		<-llm.arrivals // a's worker is planning, its summary held
		leased := waitJob(t, st, v.ID, store.JobRunning)
		dying.dead.Store(true)
		b := bgReplicas(t, st, set, 1, 1)[0]
		<-llm.arrivals // b's worker took the job after a's lease lapsed
		taken := waitJob(t, st, v.ID, store.JobRunning)
		if taken.Owner == leased.Owner || taken.Attempts != 2 || taken.ID != leased.ID {
			t.Fatalf("job taken over as %+v; leased first as %+v", taken, leased)
		}
		llm.open() // both summaries are written now; only b can store its own
		ready := waitJob(t, st, v.ID, store.JobReady)
		if ready.Owner != "" {
			t.Errorf("ready job %+v", ready)
		}
		res, err := b.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: step(0)})
		if err != nil || !res.Status.Compacted || !strings.Contains(res.Status.LastCompaction.Summary, "LLM summary 2") {
			t.Fatalf("b's result not applied: %+v, %v", res.Status, err)
		}
	})
}

// TestBackgroundResultDiscarded: a prepared result is never applied after
// the session was reverted, cleared, deleted (and made again under its id)
// or moved to another model; the call that finds it stale plans again.
func TestBackgroundResultDiscarded(t *testing.T) {
	changes := map[string]func(t *testing.T, e *engine.Engine, id string){
		"revert": func(t *testing.T, e *engine.Engine, id string) {
			list := compactions(t, e, id)
			if _, err := e.RevertCompaction(t.Context(), tenant, id, list[len(list)-1].ID); err != nil {
				t.Fatal(err)
			}
		},
		"clear": func(t *testing.T, e *engine.Engine, id string) {
			if _, err := e.ClearMessages(t.Context(), tenant, id, true, nil); err != nil {
				t.Fatal(err)
			}
		},
		"delete": func(t *testing.T, e *engine.Engine, id string) {
			if err := e.DeleteSession(t.Context(), tenant, id); err != nil {
				t.Fatal(err)
			}
			llmSessionID(t, e, id) // the same conversation again, under the same id
		},
		"model": func(t *testing.T, e *engine.Engine, id string) {
			// A 16k window: as full again as before takes 21 more steps.
			if _, err := e.UpdateSession(t.Context(), tenant, id, engine.SessionUpdate{Mask: []string{engine.FieldModel}, Model: "gpt-3.5-turbo"}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.AppendMessages(t.Context(), tenant, id, engine.AppendInput{Messages: bigSteps(200, 21)}); err != nil {
				t.Fatal(err)
			}
		},
	}
	changes["policy"] = func(t *testing.T, e *engine.Engine, id string) {
		spec, keep, off, most := "openai:gpt-4o-mini", 1000, 0, 400
		if _, err := e.UpdateSession(t.Context(), tenant, id, engine.SessionUpdate{Mask: []string{engine.FieldPolicy},
			Policy: compaction.Overrides{Summarizer: &spec, ProtectRecentToolResults: &keep, CachePaybackCalls: &off, SummaryMaxTokens: &most}}); err != nil {
			t.Fatal(err)
		}
	}
	// The gateway label decides the wording of what a plan writes
	// (compaction.Policy.NoExpandRPC): a result planned without it tells
	// the model to call ExpandMessage, which a gateway session's cannot.
	changes["gateway label"] = func(t *testing.T, e *engine.Engine, id string) {
		if _, err := e.UpdateSession(t.Context(), tenant, id, engine.SessionUpdate{Mask: []string{engine.FieldLabels},
			Labels: map[string]string{engine.GatewayLabel: "openai-chat"}}); err != nil {
			t.Fatal(err)
		}
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			backendStores(t, func(t *testing.T, st store.Store) {
				_, set := newGateLLM(t)
				e := bgReplicas(t, st, set, 1, 1)[0]
				ctx := t.Context()
				v := llmSession(t, e)
				if name == "revert" { // a compaction to revert, then back past the critical level
					if _, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize}); err != nil {
						t.Fatal(err)
					}
					if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: bigSteps(100, 11)}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{}); err != nil {
					t.Fatal(err)
				}
				job := waitJob(t, st, v.ID, store.JobReady)
				stale := jobSummary(t, job)
				change(t, e, v.ID)
				if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: step(9)}); err != nil {
					t.Fatal(err)
				}
				if _, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{}); err != nil {
					t.Fatal(err)
				}
				for _, c := range compactions(t, e, v.ID) {
					if strings.Contains(c.Summary, stale) {
						t.Errorf("the stale result (%s) was applied after %s: %+v", stale, name, c)
					}
				}
				page, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range page.Messages {
					if m.Kind == chat.KindSummary && strings.Contains(m.Parts[0].Text, stale) {
						t.Errorf("the stale summary is in the view after %s", name)
					}
					if name == "gateway label" && m.Kind != chat.KindNormal && strings.Contains(wire([]chat.Message{m}), "ExpandMessage") {
						t.Errorf("%s %s tells the gateway's model to call ExpandMessage", m.Kind, m.ID)
					}
				}
			})
		})
	}
}

// jobSummary is the "LLM summary N" a ready job's result holds.
func jobSummary(t *testing.T, j store.Job) string {
	t.Helper()
	var r struct {
		Summary string `json:"summary"`
	}
	if err := json.Unmarshal(j.Result, &r); err != nil {
		t.Fatal(err)
	}
	i := strings.Index(r.Summary, "LLM summary ")
	if i < 0 {
		t.Fatalf("the job's summary is not the LLM's: %q", r.Summary)
	}
	return strings.Join(strings.Fields(r.Summary[i:])[:3], " ")
}

// bigSteps are n tool calls from `from` on, about 325 tokens each.
func bigSteps(from, n int) []chat.Message {
	var out []chat.Message
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("call_%d", i)
		out = append(out, callMsg(id), resultMsg(id, fmt.Sprintf("step %d: %s", i, strings.Repeat("lorem ipsum dolor ", 100))))
	}
	return out
}

// TestBackgroundResultAppliedOnce: two replicas' calls race to apply one
// prepared result: one round, one compaction, and both calls answer a view
// that fits.
func TestBackgroundResultAppliedOnce(t *testing.T) {
	backendStores(t, func(t *testing.T, st store.Store) {
		_, set := newGateLLM(t)
		rs := bgReplicas(t, st, set, 2, 1)
		ctx := t.Context()
		v := llmSession(t, rs[0])
		if _, err := rs[0].PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{}); err != nil {
			t.Fatal(err)
		}
		waitJob(t, st, v.ID, store.JobReady)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, e := range rs {
			wg.Go(func() {
				res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: step(i)})
				if err == nil && res.Status.Usage.Level >= compaction.LevelSummarize {
					err = fmt.Errorf("replica %d answered a view at level %v", i, res.Status.Usage.Level)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		list := compactions(t, rs[0], v.ID)
		if len(list) != 1 || list[0].Round != 1 {
			t.Fatalf("%d compactions: %+v; want one of round 1", len(list), list)
		}
	})
}

// TestDeadlineTakesExtractive: a call whose deadline leaves no time for
// the LLM summarizer (judged by its recent summaries here) compacts with
// the extractive summary and says so; one with time uses the LLM.
func TestDeadlineTakesExtractive(t *testing.T) {
	llm, set := newGateLLM(t)
	llm.delay = 300 * time.Millisecond
	models, encodings := testModels(t)
	e := engine.New(encodings, models, openSQLite(t), engine.WithSummarizers(set))
	prepare := func(deadline time.Duration) engine.PrepareResult {
		t.Helper()
		id := llmSession(t, e).ID // made before the deadline starts
		ctx := t.Context()
		if deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, deadline)
			defer cancel()
		}
		res, err := e.PrepareContext(ctx, tenant, id, engine.PrepareInput{})
		if err != nil || !res.Status.Compacted {
			t.Fatalf("PrepareContext: %+v, %v", res.Status, err)
		}
		return res
	}
	if res := prepare(0); !strings.Contains(res.Status.LastCompaction.Summary, "LLM summary") {
		t.Fatalf("no deadline: the LLM was not used: %+v", res.Status)
	}
	calls := llm.n.Load()
	res := prepare(200 * time.Millisecond)
	if strings.Contains(res.Status.LastCompaction.Summary, "LLM summary") || llm.n.Load() != calls ||
		!strings.Contains(strings.Join(res.Status.Warnings, " "), "deadline leaves no time for the LLM summarizer") {
		t.Fatalf("a 200 ms deadline after 300 ms summaries: LLM asked %d times, warnings %v", llm.n.Load()-calls, res.Status.Warnings)
	}
	if res := prepare(time.Minute); !strings.Contains(res.Status.LastCompaction.Summary, "LLM summary") {
		t.Fatalf("a minute's deadline: the LLM was not used: %+v", res.Status)
	}
}

// bgEngine is one replica with background jobs as configured by bg (its
// workers run until the test ends).
func bgEngine(t *testing.T, st store.Store, set *summarize.Set, bg engine.Background) *engine.Engine {
	models, encodings := testModels(t)
	e := engine.New(encodings, models, st, engine.WithSummarizers(set), engine.WithBackground(bg))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.RunJobs(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// TestBackgroundQueueFull: a session the queue refuses is not left waiting
// for a job that does not exist: its call compacts in place, with the LLM.
func TestBackgroundQueueFull(t *testing.T) {
	backendStores(t, func(t *testing.T, st store.Store) {
		llm, set := newGateLLM(t)
		e := bgEngine(t, st, set, engine.Background{Enabled: true, Workers: 1, Queue: 1, Lease: time.Second, Poll: 20 * time.Millisecond})
		ctx := t.Context()
		a, b := llmSession(t, e), llmSession(t, e)
		llm.shut() // a's job holds the only place in the queue
		if res, err := e.PrepareContext(ctx, tenant, a.ID, engine.PrepareInput{}); err != nil || res.Status.Compacted {
			t.Fatalf("a: %+v, %v", res.Status, err)
		}
		<-llm.arrivals
		done := make(chan engine.PrepareResult, 1)
		go func() {
			res, err := e.PrepareContext(ctx, tenant, b.ID, engine.PrepareInput{})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		<-llm.arrivals // b's call asks the LLM itself
		llm.open()
		res := <-done
		if !res.Status.Compacted || !strings.Contains(res.Status.LastCompaction.Summary, "LLM summary") {
			t.Fatalf("b, refused a job, did not compact in the call: %+v", res.Status)
		}
		if _, err := st.GetJob(ctx, tenant, b.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("b has a job: %v", err)
		}
	})
}

// TestBackgroundGivenUp: a job whose LLM keeps failing is given up after
// its attempts and left as a tombstone; the session's calls then compact
// themselves instead of waiting, and it is not scheduled again for the
// same view.
func TestBackgroundGivenUp(t *testing.T) {
	backendStores(t, func(t *testing.T, st store.Store) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest) // not retried by the SDK
			_, _ = w.Write([]byte(`{"error":{"message":"no","type":"invalid_request_error"}}`))
		}))
		defer srv.Close()
		set, err := summarize.NewSet("extractive", map[string]summarize.Endpoint{summarize.ProviderOpenAI: {
			BaseURL: srv.URL + "/v1/", APIKey: "k", Timeout: 5 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		clock := &fakeClock{t: time.Now()}
		models, encodings := testModels(t)
		e := engine.New(encodings, models, st, engine.WithSummarizers(set), engine.WithClock(clock.now),
			engine.WithBackground(engine.Background{Enabled: true, Workers: 1, Lease: time.Second, Poll: 10 * time.Millisecond}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); e.RunJobs(ctx) }()
		defer func() { cancel(); <-done }()
		v := llmSession(t, e)
		if res, err := e.PrepareContext(t.Context(), tenant, v.ID, engine.PrepareInput{}); err != nil || res.Status.Compacted {
			t.Fatalf("first call: %+v, %v", res.Status, err)
		}
		var j store.Job
		for range 3000 { // each failure waits 5 s × attempts of the (fake) clock
			clock.add(time.Minute)
			if j, err = st.GetJob(t.Context(), tenant, v.ID); err == nil && j.State == store.JobFailed {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if j.State != store.JobFailed || j.Attempts != 3 {
			t.Fatalf("job %+v, %v; want given up after 3 attempts", j, err)
		}
		res, err := e.PrepareContext(t.Context(), tenant, v.ID, engine.PrepareInput{})
		if err != nil || !res.Status.Compacted || !strings.Contains(strings.Join(res.Status.Warnings, " "), "LLM summarizer failed") {
			t.Fatalf("after the job was given up the call did not compact itself: %+v, %v", res.Status, err)
		}
	})
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestBackgroundLeaseTakenOver: a worker whose lease another worker took
// (of another server or of its own) cannot store its result, renew or hand
// back the job: each lease has its own token.
func TestBackgroundLeaseTakenOver(t *testing.T) {
	backendStores(t, func(t *testing.T, st store.Store) {
		llm, set := newGateLLM(t)
		reg := prometheus.NewRegistry()
		models, encodings := testModels(t)
		e := engine.New(encodings, models, st, engine.WithSummarizers(set), engine.WithMetrics(telemetry.NewMetrics(reg, func() float64 { return 0 })),
			engine.WithBackground(engine.Background{Enabled: true, Workers: 1, Lease: time.Hour, Poll: 20 * time.Millisecond}))
		jctx, cancel := context.WithCancel(context.Background())
		jobs := make(chan struct{})
		go func() { defer close(jobs); e.RunJobs(jctx) }()
		defer func() { cancel(); <-jobs }()
		running := func() float64 {
			families, _ := reg.Gather()
			for _, f := range families {
				if f.GetName() == "contextd_compaction_jobs_running" {
					return f.GetMetric()[0].GetGauge().GetValue()
				}
			}
			return -1
		}
		ctx := t.Context()
		v := llmSession(t, e)
		llm.shut()
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{}); err != nil {
			t.Fatal(err)
		}
		<-llm.arrivals
		leased := waitJob(t, st, v.ID, store.JobRunning)
		if running() != 1 {
			t.Fatalf("running gauge %v while the worker plans", running())
		}
		server, _, _ := strings.Cut(leased.Owner, ":")
		other := leased
		other.Owner = server + ":another-lease" // the same server's other worker
		if err := st.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return tx.PutJob(ctx, &other) }); err != nil {
			t.Fatal(err)
		}
		llm.open()
		for i := 0; running() != 0; i++ { // the first worker tried to store its result
			if i == 1000 {
				t.Fatal("the first worker never finished")
			}
			time.Sleep(10 * time.Millisecond)
		}
		j, err := st.GetJob(ctx, tenant, v.ID)
		if err != nil || j.State != store.JobRunning || j.Owner != other.Owner || j.Result != nil {
			t.Fatalf("the first worker wrote a job it no longer holds: state %s, owner %q, %d result bytes, %v", j.State, j.Owner, len(j.Result), err)
		}
	})
}

// TestBackgroundAgedResultFullQueue: a ready result too old to apply whose
// job cannot be queued again (the tenant's queue is full) does not leave
// the session waiting: the call compacts in place.
func TestBackgroundAgedResultFullQueue(t *testing.T) {
	backendStores(t, func(t *testing.T, st store.Store) {
		llm, set := newGateLLM(t)
		e := bgEngine(t, st, set, engine.Background{Enabled: true, Workers: 1, PerTenant: 1, Lease: time.Hour, Poll: 20 * time.Millisecond})
		ctx := t.Context()
		a := llmSession(t, e)
		if _, err := e.PrepareContext(ctx, tenant, a.ID, engine.PrepareInput{}); err != nil {
			t.Fatal(err)
		}
		j := waitJob(t, st, a.ID, store.JobReady)
		var r map[string]any
		if err := json.Unmarshal(j.Result, &r); err != nil {
			t.Fatal(err)
		}
		r["tokens_after"] = 5000 // aged: past halfway to the warning level
		j.Result, _ = json.Marshal(r)
		if err := st.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return tx.PutJob(ctx, &j) }); err != nil {
			t.Fatal(err)
		}
		b := llmSession(t, e)
		llm.shut() // b's job holds the tenant's only place
		if _, err := e.PrepareContext(ctx, tenant, b.ID, engine.PrepareInput{}); err != nil {
			t.Fatal(err)
		}
		<-llm.arrivals
		waitJob(t, st, b.ID, store.JobRunning)
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second) // the LLM is held: the deadline cuts it short
		defer cancel()
		res, err := e.PrepareContext(dctx, tenant, a.ID, engine.PrepareInput{})
		llm.open()
		if err != nil || !res.Status.Compacted {
			t.Fatalf("a waited for a job that cannot run: %+v, %v", res.Status, err)
		}
	})
}

// slowPrepareStore delays the transactions of calls marked slowPrepare once
// a job was scheduled: the prepare's own write comes well after the job it
// scheduled, which a worker may take first.
type slowPrepareStore struct {
	store.Store
	scheduled atomic.Bool
}

type slowPrepare struct{}

type scheduleSpy struct {
	store.Tx
	s *slowPrepareStore
}

func (t scheduleSpy) PutJob(ctx context.Context, j *store.Job) error {
	if j.State == store.JobQueued {
		t.s.scheduled.Store(true)
	}
	return t.Tx.PutJob(ctx, j)
}

func (s *slowPrepareStore) InTx(ctx context.Context, fn func(context.Context, store.Tx) error) error {
	if ctx.Value(slowPrepare{}) != nil && s.scheduled.Load() {
		time.Sleep(300 * time.Millisecond)
	}
	return s.Store.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return fn(ctx, scheduleSpy{tx, s}) })
}

// TestBackgroundScheduledBeforeAppend: a call that schedules a job before
// its own append commits (one large append from below the warning level to
// past the critical one) does not lose the job to a worker that sees the
// view before the append: the job is tried again and gives a result.
func TestBackgroundScheduledBeforeAppend(t *testing.T) {
	backendStores(t, func(t *testing.T, st store.Store) {
		_, set := newGateLLM(t)
		sw := &slowPrepareStore{Store: st}
		e := bgEngine(t, sw, set, engine.Background{Enabled: true, Workers: 1, Lease: time.Second, Poll: 20 * time.Millisecond})
		spec, keep, off := "openai:gpt-4o-mini", 1000, 0
		v := agentSessionID(t, e, "", compaction.Overrides{Summarizer: &spec, ProtectRecentToolResults: &keep, CachePaybackCalls: &off}, 8)
		ctx := context.WithValue(t.Context(), slowPrepare{}, true)
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: bigSteps(100, 12)})
		if err != nil || res.Status.Compacted {
			t.Fatalf("first call: %+v, %v", res.Status, err)
		}
		for range 2000 {
			j, err := st.GetJob(t.Context(), tenant, v.ID)
			if err != nil || j.State == store.JobFailed {
				t.Fatalf("the job was lost: %+v, %v", j, err)
			}
			if j.State == store.JobReady {
				return
			}
			time.Sleep(10 * time.Millisecond) // retried after 5 s × attempts
		}
		t.Fatal("the job never became ready")
	})
}
