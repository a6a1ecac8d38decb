package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/api"
	"github.com/contextd/contextd/internal/compaction"
)

// loadCorpus returns, per transcript, the texts of its user and tool
// messages (at most 1,500 bytes each), which the agents replay as their
// turns.
func loadCorpus(dir string) ([][]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no transcripts in %s (run from the repository's root): %v", dir, err)
	}
	sort.Strings(files)
	var out [][]string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
		var texts []string
		for sc.Scan() && len(texts) < 400 {
			var m struct{ Role, Content string }
			if json.Unmarshal(sc.Bytes(), &m) != nil || (m.Role != "user" && m.Role != "tool") || strings.TrimSpace(m.Content) == "" {
				continue
			}
			t := m.Content
			if len(t) > 1500 {
				t = t[:1500]
				for !utf8.ValidString(t) {
					t = t[:len(t)-1]
				}
			}
			texts = append(texts, t)
		}
		fh.Close()
		if len(texts) > 0 {
			out = append(out, texts)
		}
	}
	return out, nil
}

// drive runs the agents and the faults for the duration, then the final
// checks; it returns how many faults were injected.
func (s *soak) drive(ctx context.Context) int {
	o := s.opt
	d := o.duration
	quiet := max(20*time.Second, d/10) // the agents' last stretch runs without faults
	// The leak check's first window: 5 minutes of 30; at least a minute,
	// past the warm-up (the view cache and the pools fill), but at most a
	// third of a short run.
	window := min(max(time.Minute, d/6), d/3)
	fmt.Printf("soak: %d agents for %s on %d replicas (faults until %s)\n", o.agents, d, o.replicas, d-quiet)
	s.rep.start, s.hist.start = time.Now(), time.Now()
	actx, stopAgents := context.WithTimeout(ctx, d)
	defer stopAgents()
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	s.watchCtx = wctx
	var wg sync.WaitGroup
	for a := range o.agents {
		wg.Add(1)
		go func() {
			defer s.guard()
			defer wg.Done()
			if a%3 == 2 {
				s.api.run(actx, a)
			} else {
				s.gw.run(actx, a)
			}
		}()
	}
	// The sampler runs throughout.
	sctx, stopSampler := context.WithCancel(ctx)
	var swg sync.WaitGroup
	swg.Add(1)
	go func() {
		defer s.guard()
		defer swg.Done()
		t := time.NewTicker(min(o.sampleEvery, max(d/36, time.Second)))
		defer t.Stop()
		for {
			s.sampler.take(sctx, actx.Err() == nil)
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	s.provider.on.Store(true)
	s.faults(actx, d-quiet)
	s.provider.on.Store(false)
	// Checkpoints ran inside faults; the agents finish their last stretch.
	<-actx.Done()
	wg.Wait()
	if ctx.Err() != nil {
		stopSampler()
		swg.Wait()
		return 0
	}
	fmt.Printf("%8s  agents stopped; checking\n", time.Since(s.rep.start).Round(time.Second))
	s.final(ctx)
	s.sampler.take(ctx, false)
	stopSampler()
	swg.Wait()
	for _, g := range s.sampler.growth(window) {
		s.rep.problem(leaked, "%s", g)
	}
	n := len(s.events)
	fc := s.provider.faultCounts()
	keys := make([]string, 0, len(fc))
	for k, v := range fc {
		n += v
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Print("provider faults:")
	for _, k := range keys {
		fmt.Printf(" %s %d,", k, fc[k])
	}
	fmt.Printf(" scheduled faults %d\n", len(s.events))
	return n
}

// faults runs the schedule until end: a replica killed every killEvery
// (not replica 0 when there are others: its curves are the leak check's),
// restarted after killPause; PostgreSQL restarted once at 40 %; a replica
// paused for twice the lease at 60 %; a watcher that stops reading from
// 20 % to 70 %; checkpoints at a third and two thirds.
func (s *soak) faults(ctx context.Context, end time.Duration) {
	o := s.opt
	start := s.rep.start
	type step struct {
		at time.Duration
		do func()
	}
	var steps []step
	victim := func() *replica {
		if len(s.replicas) == 1 {
			return s.replicas[0]
		}
		return s.replicas[1+rand.IntN(len(s.replicas)-1)]
	}
	if o.killEvery > 0 {
		for at := o.killEvery / 2; at < end-o.killPause; at += o.killEvery {
			steps = append(steps, step{at, func() {
				r := victim()
				s.event(fmt.Sprintf("kill -9 replica %d (pid %d)", r.n, r.pid()))
				s.mu.Lock()
				s.kills = append(s.kills, time.Now())
				s.mu.Unlock()
				r.kill()
				s.restarts.Add(1)
				go func() {
					defer s.guard()
					defer s.restarts.Done()
					time.Sleep(o.killPause)
					if err := r.start(context.Background()); err != nil {
						s.rep.problem(stuck, "replica %d did not restart: %v", r.n, err)
					}
				}()
			}})
		}
	}
	steps = append(steps, step{o.duration * 4 / 10, func() {
		s.event("PostgreSQL restart (fast shutdown, 2 s down)")
		if err := s.pg.restart(2 * time.Second); err != nil {
			s.rep.problem(stuck, "PostgreSQL did not restart: %v", err)
		}
	}})
	steps = append(steps, step{o.duration * 6 / 10, func() {
		r := victim()
		s.event(fmt.Sprintf("SIGSTOP replica %d for %s (its job leases lapse)", r.n, 2*o.lease))
		r.signal(syscall.SIGSTOP)
		go func() {
			defer s.guard()
			time.Sleep(2 * o.lease)
			r.signal(syscall.SIGCONT)
			s.event(fmt.Sprintf("SIGCONT replica %d", r.n))
		}()
	}})
	// stall is set when the stalled watcher starts (a run too short for
	// its step has none to wait for).
	var stall chan struct{}
	steps = append(steps, step{o.duration * 2 / 10, func() {
		s.event("a watcher stops reading")
		stall = make(chan struct{})
		go s.stalledWatcher(ctx, stall, o.duration/2)
	}})
	for _, f := range []int{1, 2} {
		steps = append(steps, step{o.duration * time.Duration(f) / 3, func() { s.checkpoint(ctx) }})
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].at < steps[j].at })
	for _, st := range steps {
		if st.at > end {
			break
		}
		if !sleepCtx(ctx, time.Until(start.Add(st.at))) {
			return
		}
		st.do()
	}
	sleepCtx(ctx, time.Until(start.Add(end)))
	// Every replica runs again before the quiet stretch.
	for _, r := range s.replicas {
		r.signal(syscall.SIGCONT)
	}
	if stall != nil {
		<-stall
	}
}

// stalledWatcher opens a watch of every session of the tenant on its own
// connection with the smallest flow-control windows and does not read
// for hold; then it reads what is there and ends. The replicas must hold
// on meanwhile (the leak check sees their goroutines and memory).
func (s *soak) stalledWatcher(ctx context.Context, done chan<- struct{}, hold time.Duration) {
	defer s.guard()
	defer close(done)
	cc, err := grpc.NewClient(s.replicas[0].addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10), grpc.WithReadBufferSize(0))
	if err != nil {
		s.rep.problem(invalid, "stalled watcher: %v", err)
		return
	}
	defer cc.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := contextdv1.NewContextServiceClient(cc).WatchContextStatus(wctx, &contextdv1.WatchContextStatusRequest{})
	if err != nil {
		s.rep.note("stalled watcher: the watch was refused: %v", err)
		return
	}
	sleepCtx(ctx, hold)
	n := 0
	for ; n < 100000; n++ {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		got := make(chan error, 1)
		go func() { _, err := st.Recv(); got <- err }()
		select {
		case err = <-got:
		case <-rctx.Done():
			err = rctx.Err()
		}
		rcancel()
		if err != nil {
			break
		}
	}
	s.event(fmt.Sprintf("the stalled watcher read again: %d events, then %v", n, err))
}

// checkpoint reads every API session's log into the history (so the
// linearizability check sees reads concurrent with the writes) and checks
// that every gateway conversation's acknowledged turns start its log.
func (s *soak) checkpoint(ctx context.Context) {
	fmt.Printf("%8s  checkpoint\n", time.Since(s.rep.start).Round(time.Second))
	s.readAll(ctx)
	for _, c := range s.gw.snapshot() {
		if c.session == "" {
			continue
		}
		log, err := s.logOf(ctx, c.session, contextdv1.MessageView_MESSAGE_VIEW_LOG)
		if err != nil {
			continue
		}
		s.compareGateway(c, log, false, time.Now())
	}
}

func (s *soak) readAll(ctx context.Context) {
	for _, sess := range s.api.list() {
		call := s.hist.now()
		log, err := s.logOf(ctx, sess.id, contextdv1.MessageView_MESSAGE_VIEW_LOG)
		if err != nil {
			continue
		}
		s.hist.add(opInput{session: sess.id, kind: opRead}, call, opOutput{keys: keysOf(log)})
	}
}

// compareGateway checks a conversation's log: its acknowledged turns, in
// order, each once, then (at the end) nothing but the turn it gave up.
//
// readAt is when a checkpoint read the log (the zero time at the end).
func (s *soak) compareGateway(c conversation, log []*contextdv1.Message, final bool, readAt time.Time) {
	var got []turn
	for _, m := range log {
		role := strings.ToLower(strings.TrimPrefix(m.GetRole().String(), "ROLE_"))
		var text strings.Builder
		for _, p := range m.GetParts() {
			text.WriteString(p.GetText().GetText())
		}
		got = append(got, turn{role, text.String()})
	}
	seen := map[turn]int{}
	for _, t := range got {
		if t.role == "user" {
			seen[t]++
		}
	}
	for t, n := range seen {
		if n > 1 {
			s.rep.problem(duplicated, "gateway session %s (%s): %q is in the log %d times", c.session, c.door, short(t.text), n)
		}
	}
	s.mu.Lock()
	kills := append([]time.Time(nil), s.kills...)
	s.mu.Unlock()
	if lacksLastReply(c.acked, got) {
		switch {
		case unrecordedAtKill(c.ackedAt, kills):
			if final {
				s.unrecordedAtKill.Add(1)
			} else {
				s.rep.note("gateway session %s (%s): at a checkpoint, the last acknowledged reply is unrecorded at a kill", c.session, c.door)
			}
			return
		case !final && readAt.Sub(c.ackedAt) < killGap:
			// A checkpoint runs while the agents do: the reply of a
			// turn acknowledged just now is being recorded (after its
			// answer went out). The final check, once settled, has no
			// such allowance.
			return
		}
	}
	when := "at the end"
	if !final {
		when = fmt.Sprintf("at the checkpoint at %s, the last turn acknowledged %s before the read",
			readAt.Sub(s.rep.start).Round(time.Second), readAt.Sub(c.ackedAt).Round(time.Millisecond))
	}
	for i, want := range c.acked {
		if i >= len(got) {
			s.rep.problem(lost, "gateway session %s (%s): the log has %d messages, the client holds %d acknowledged; first missing: %s %q (%s)",
				c.session, c.door, len(got), len(c.acked), want.role, short(want.text), when)
			return
		}
		if got[i] != want {
			s.rep.problem(lost, "gateway session %s (%s): log message %d is %s %q, the acknowledged history has %s %q (%s)",
				c.session, c.door, i, got[i].role, short(got[i].text), want.role, short(want.text), when)
			return
		}
	}
	if !final {
		return
	}
	rest := got[len(c.acked):]
	if len(rest) == 0 || (c.pending != "" && rest[0] == turn{"user", c.pending} && len(rest) <= 2 && (len(rest) == 1 || rest[1].role == "assistant")) {
		return
	}
	s.rep.problem(duplicated, "gateway session %s (%s): %d messages after the acknowledged history, first %s %q",
		c.session, c.door, len(rest), rest[0].role, short(rest[0].text))
}

// killGap is how long after a turn's acknowledgment a kill -9 of the
// replica that relayed it may leave its reply unrecorded (the reply is
// recorded from just before the answer's last byte, after it reaches the
// client); the ledger check allows the same two seconds.
const killGap = 2 * time.Second

// lacksLastReply reports whether got (a conversation's log) is the
// acknowledged history but for the reply of its last turn: the client
// holds that reply and its next request carries it, so it is not lost
// while the gateway may still record it. A reply followed by later
// acknowledged turns is never excused.
func lacksLastReply(acked, got []turn) bool {
	n := len(acked)
	return n > 0 && acked[n-1].role == "assistant" && len(got) == n-1 && slices.Equal(got, acked[:n-1])
}

// unrecordedAtKill reports whether a replica was killed within killGap
// after ackedAt, when a reply acknowledged then may not have been
// recorded (the kill time is taken just before the signal, hence the
// small slack before ackedAt).
func unrecordedAtKill(ackedAt time.Time, kills []time.Time) bool {
	for _, k := range kills {
		if !k.Before(ackedAt.Add(-100*time.Millisecond)) && !k.After(ackedAt.Add(killGap)) {
			return true
		}
	}
	return false
}

func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// final waits for the replicas to settle, then checks everything.
func (s *soak) final(ctx context.Context) {
	// Every replica must be up: a kill's restart may still be running
	// (each is bounded: the pause, then 90 s to answer; one that failed
	// is counted, and its replica stays down: the calls go to the others).
	for _, r := range s.replicas {
		r.signal(syscall.SIGCONT)
	}
	s.restarts.Wait()
	time.Sleep(3 * time.Second)
	s.readAll(ctx)
	// Views: the compaction validator and the window, on every session.
	ids := map[string]string{} // session → where it came from
	for _, c := range s.gw.snapshot() {
		if c.session != "" {
			ids[c.session] = "gateway " + c.door
		}
	}
	for _, sess := range s.api.list() {
		ids[sess.id] = "API"
	}
	cleared := map[string]bool{}
	for _, sess := range s.api.list() {
		sess.mu.Lock()
		c, r := sess.cleared, sess.reverted
		sess.mu.Unlock()
		cleared[sess.id] = c
		if r {
			// A revert brings back the view as it was before its
			// compaction, over the window maybe: the agent's next call
			// compacts it again. Make that call.
			s.prepareAgain(ctx, sess.id)
		}
	}
	for id, from := range ids {
		s.checkView(ctx, id, from, cleared[id])
	}
	// Gateway conversations: acknowledged turns once each, in order. A
	// conversation never told its session (the attempt that made it was
	// cut before its headers, and the gateway names a session found by
	// history to no caller without a signal) is found by the tag of its
	// first turn, which no other conversation's log starts with.
	var tagged map[string]string
	for _, c := range s.gw.snapshot() {
		if c.session == "" && len(c.acked) > 0 {
			if tagged == nil {
				tagged = s.sessionsByTag(ctx)
			}
			c.session = tagged[tagOf(c.acked[0].text)]
		}
		if c.session == "" {
			if len(c.acked) > 0 {
				// Answered turns the checker cannot find: unchecked is
				// not kept.
				s.rep.problem(lost, "gateway conversation (%s): %d acknowledged messages, and no X-Contextd-Session named where", c.door, len(c.acked))
			}
			continue
		}
		if log, err := s.logOf(ctx, c.session, contextdv1.MessageView_MESSAGE_VIEW_LOG); err == nil {
			s.compareGateway(c, log, true, time.Time{})
		} else {
			s.rep.problem(lost, "gateway session %s: cannot read it back: %v", c.session, err)
		}
	}
	fmt.Printf("gateway: %d conversations (unrecorded at a kill: %d)\n", len(s.gw.snapshot()), s.unrecordedAtKill.Load())
	// Linearizability of the API sessions.
	bad, undecided := s.hist.check(60 * time.Second)
	for _, b := range append(bad, undecided...) {
		s.rep.problem(invalid, "%s", b)
	}
	s.checkLedger(ctx)
	s.checkJobs(ctx)
	s.checkWatchers(ctx)
}

// prepareAgain is an agent's next PrepareContext, with no new messages.
func (s *soak) prepareAgain(ctx context.Context, id string) {
	in := opInput{session: id, kind: opAppend}
	call := s.hist.now()
	var prepared *contextdv1.PrepareContextResponse
	err := s.call(ctx, "PrepareContext", 0, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
		var err error
		prepared, err = c.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: id, IdempotencyKey: id + "-final"})
		return err
	})
	if err != nil {
		s.hist.add(in, call, opOutput{unknown: true})
		return
	}
	s.hist.add(in, call, opOutput{keys: keysOf(prepared.GetMessages())})
	if u := prepared.GetStatus().GetUsage(); u.GetUsedTokens() > u.GetContextWindow() {
		s.rep.problem(invalid, "session %s: PrepareContext after a revert returned a view of %d tokens for a window of %d", id, u.GetUsedTokens(), u.GetContextWindow())
	}
}

// checkView runs the compaction validator on a session's view against its
// log since the last clear, and checks the view fits its window.
func (s *soak) checkView(ctx context.Context, id, from string, cleared bool) {
	var sess *contextdv1.GetSessionResponse
	if err := s.call(ctx, "GetSession", 0, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
		var err error
		sess, err = c.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: id})
		return err
	}); err != nil {
		s.rep.problem(lost, "session %s (%s): GetSession: %v", id, from, err)
		return
	}
	if u := sess.GetSession().GetUsage(); u.GetUsedTokens() > u.GetContextWindow() {
		s.rep.problem(invalid, "session %s (%s): view of %d tokens for a window of %d", id, from, u.GetUsedTokens(), u.GetContextWindow())
	}
	view, err1 := s.logOf(ctx, id, contextdv1.MessageView_MESSAGE_VIEW_ACTIVE)
	log, err2 := s.logOf(ctx, id, contextdv1.MessageView_MESSAGE_VIEW_LOG)
	if err1 != nil || err2 != nil {
		s.rep.problem(lost, "session %s (%s): cannot read it back: %v %v", id, from, err1, err2)
		return
	}
	// The log, and the view's originals, hold what the agents sent, byte
	// for byte.
	differ, unsent := s.sent.check(append(append([]*contextdv1.Message(nil), log...), view...))
	for _, k := range differ {
		s.rep.problem(lost, "session %s (%s): the log's message %s is not what the agent sent", id, from, k)
	}
	for _, k := range unsent {
		s.rep.problem(invalid, "session %s (%s): the log holds %s, which no agent sent", id, from, k)
	}
	// The log since the last clear is what the view stands for: find the
	// view's first original message in the log.
	before := api.MessagesFromResponse(log)
	first := ""
	for _, m := range view {
		if m.GetKind() == contextdv1.MessageKind_MESSAGE_KIND_NORMAL {
			first = m.GetId()
			break
		}
	}
	switch {
	case first == "" && cleared:
		before = nil // cleared last: the view is empty
	case first == "":
		if len(before) > 0 {
			s.rep.problem(lost, "session %s (%s): the view holds none of the log's %d messages, and no clear emptied it", id, from, len(before))
		}
		return
	}
	for i, m := range before {
		if m.ID == first {
			before = before[i:]
			break
		}
	}
	if err := compaction.Validate(before, api.MessagesFromResponse(view), ""); err != nil {
		s.rep.problem(invalid, "session %s (%s): the view fails the compaction validator: %v", id, from, err)
	}
}

// checkLedger compares the ledgers with what the provider billed the
// agents. A replica killed right after a call's answer was relayed may
// not have recorded its usage: calls the provider answered in the two
// seconds before a kill are reported, not counted as lost, when the
// ledger lacks at most that many.
func (s *soak) checkLedger(ctx context.Context) {
	var calls, input, output int64
	if !s.eachSession(ctx, "ledger", func(ses *contextdv1.Session) bool {
		var got *contextdv1.GetSessionResponse
		if err := s.call(ctx, "GetSession", 0, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
			var err error
			got, err = c.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: ses.GetId()})
			return err
		}); err != nil {
			s.rep.problem(lost, "ledger: GetSession %s: %v", ses.GetId(), err)
			return false
		}
		l := got.GetSession().GetLedger().GetCalls()
		calls += l.GetCalls()
		input += l.GetInputTokens() + l.GetCacheReadTokens() + l.GetCacheWriteTokens()
		output += l.GetOutputTokens()
		return true
	}) {
		return
	}
	billed := int64(s.provider.agents.Billed())
	in, out := s.provider.agents.Totals()
	s.mu.Lock()
	kills := append([]time.Time(nil), s.kills...)
	s.mu.Unlock()
	atKill := 0
	for _, k := range kills {
		atKill += s.provider.answeredBetween(k.Add(-killGap), k)
	}
	unreported := s.unreported.Load()
	fmt.Printf("ledger: %d calls, %d input and %d output tokens; the provider billed %d calls, %d input and %d output tokens (%d answered within 2 s before a kill, %d never reported by their agent)\n",
		calls, input, output, billed, in, out, atKill, unreported)
	rec, bill := usage{calls, input, output}, usage{billed, in, out}
	if class, msg := judgeLedger(rec, bill, int64(atKill)+unreported); class >= 0 {
		s.rep.problem(class, "%s", msg)
	} else if msg != "" {
		s.rep.note("%s", msg)
	}
}

// usage is a count of model calls and their tokens.
type usage struct{ calls, input, output int64 }

// judgeLedger compares what the ledgers recorded with what the provider
// billed; up to missable calls may be missing (answered just before a
// kill -9, or never reported by their agent), and then their tokens too,
// but never more calls or tokens than were billed. It returns the problem
// class and its text, or -1 and a note ("" when they are equal).
func judgeLedger(rec, bill usage, missable int64) (int, string) {
	short := bill.calls - rec.calls
	switch {
	case short < 0 || rec.input > bill.input || rec.output > bill.output:
		return duplicated, fmt.Sprintf("ledger: %d calls, %d input and %d output tokens recorded, the provider billed %d, %d and %d",
			rec.calls, rec.input, rec.output, bill.calls, bill.input, bill.output)
	case short > missable:
		return lost, fmt.Sprintf("ledger: %d calls recorded, the provider billed %d (%d missing; at most %d explained by kills and unreported calls)",
			rec.calls, bill.calls, short, missable)
	case short == 0 && rec != bill:
		return invalid, fmt.Sprintf("ledger: %d input and %d output tokens recorded, the provider reported %d and %d", rec.input, rec.output, bill.input, bill.output)
	case short == 0:
		return -1, ""
	case rec.input == bill.input:
		// Calls missing, yet none of their input tokens (every call has
		// a prompt): a call recorded without its usage, or another's.
		return invalid, fmt.Sprintf("ledger: %d calls missing but their tokens recorded (%d input and %d output tokens recorded, %d and %d billed)",
			short, rec.input, rec.output, bill.input, bill.output)
	}
	return -1, fmt.Sprintf("ledger: %d calls answered just before a kill -9 (or never reported) are not in the ledger (%d input and %d output tokens)",
		short, bill.input-rec.input, bill.output-rec.output)
}

// checkJobs finds background jobs older than their lease plus a margin.
func (s *soak) checkJobs(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(qctx, s.pg.url())
	if err != nil {
		s.rep.problem(stuck, "jobs: %v", err)
		return
	}
	defer conn.Close(qctx)
	margin := s.opt.lease + 20*time.Second
	rows, err := conn.Query(qctx, `SELECT session_id, state, now() - updated_at FROM compaction_jobs
		WHERE (state = 'running' AND lease_until < now() - $1::interval)
		   OR (state = 'queued' AND greatest(not_before, updated_at) < now() - $2::interval)`,
		20*time.Second, margin)
	if err != nil {
		s.rep.problem(stuck, "jobs: %v", err)
		return
	}
	// A row that cannot be read, or a query cut short, is a job not
	// checked: counted, not skipped.
	for rows.Next() {
		var id, state string
		var age time.Duration
		if err := rows.Scan(&id, &state, &age); err != nil {
			s.rep.problem(stuck, "jobs: %v", err)
			continue
		}
		s.rep.problem(stuck, "job of session %s %s, last updated %s ago (lease %s)", id, state, age.Round(time.Second), s.opt.lease)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		s.rep.problem(stuck, "jobs: %v", err)
	}
	var n, compactions, reverted int
	var states string
	_ = conn.QueryRow(qctx, "SELECT count(*), coalesce(string_agg(DISTINCT state, ','), '') FROM compaction_jobs").Scan(&n, &states)
	_ = conn.QueryRow(qctx, "SELECT count(*), count(reverted_at) FROM compactions").Scan(&compactions, &reverted)
	fmt.Printf("jobs: %d rows left at the end (%s); %d compactions stored, %d of them reverted\n", n, states, compactions, reverted)
}

// checkWatchers waits (at most 30 s) for every API session's watcher to
// reach the session's final version.
func (s *soak) checkWatchers(ctx context.Context) {
	deadline := time.Now().Add(30 * time.Second)
	final := map[string]int64{}
	var open []*apiSession
	s.api.mu.Lock()
	for _, sess := range s.api.sessions {
		if !sess.done {
			open = append(open, sess)
		}
	}
	s.api.mu.Unlock()
	for _, sess := range open {
		var got *contextdv1.GetSessionResponse
		if err := s.call(ctx, "GetSession", 0, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
			var err error
			got, err = c.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: sess.id})
			return err
		}); err != nil {
			s.rep.problem(stuck, "watcher of session %s: the session's final version cannot be read: %v", sess.id, err)
			continue
		}
		final[sess.id] = got.GetSession().GetVersion()
	}
	for _, sess := range open {
		want, ok := final[sess.id]
		for ok {
			sess.mu.Lock()
			w := sess.watched
			sess.mu.Unlock()
			if w >= want {
				break
			}
			if time.Now().After(deadline) {
				s.rep.problem(stuck, "watcher of session %s ended at version %d, the session is at %d", sess.id, w, want)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// tagOf is the tag a gateway agent's turn text starts with («gA.cC.tT»),
// or "" when it has none.
func tagOf(text string) string {
	if !strings.HasPrefix(text, "«") {
		return ""
	}
	i := strings.Index(text, "»")
	if i < 0 {
		return ""
	}
	return text[:i+len("»")]
}

// sessionsByTag maps the tag of each session's first logged message to the
// session: of several (a conversation forked, or replayed into a session
// of its own), the one with the longest log, which holds the rest.
func (s *soak) sessionsByTag(ctx context.Context) map[string]string {
	out := map[string]string{}
	longest := map[string]int64{}
	s.eachSession(ctx, "gateway", func(ses *contextdv1.Session) bool {
		var first *contextdv1.GetMessagesResponse
		if err := s.call(ctx, "GetMessages", 0, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
			var err error
			first, err = c.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: ses.GetId(), View: contextdv1.MessageView_MESSAGE_VIEW_LOG, PageSize: 1})
			return err
		}); err != nil || len(first.GetMessages()) == 0 {
			return true
		}
		text := ""
		for _, p := range first.GetMessages()[0].GetParts() {
			text += p.GetText().GetText()
		}
		if tag := tagOf(text); tag != "" && ses.GetLogCount() >= longest[tag] {
			out[tag], longest[tag] = ses.GetId(), ses.GetLogCount()
		}
		return true
	})
	return out
}

// eachSession calls fn on every session of the tenant, page by page, until
// fn answers false; false when listing failed (a problem reported for
// what) or fn stopped it.
func (s *soak) eachSession(ctx context.Context, what string, fn func(*contextdv1.Session) bool) bool {
	token := ""
	for page := 0; page < 1000; page++ {
		var resp *contextdv1.ListSessionsResponse
		if err := s.call(ctx, "ListSessions", 0, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
			var err error
			resp, err = c.ListSessions(ctx, &contextdv1.ListSessionsRequest{PageSize: 1000, PageToken: token})
			return err
		}); err != nil {
			s.rep.problem(lost, "%s: ListSessions: %v", what, err)
			return false
		}
		for _, ses := range resp.GetSessions() {
			if !fn(ses) {
				return false
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	return true
}
