package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// apiSession is one session an API agent drives, and its watcher.
type apiSession struct {
	id string
	// watched is the highest version the session's watcher saw.
	mu      sync.Mutex
	watched int64
	// abandoned: a write's outcome stayed unknown, the agent left it.
	abandoned bool
	// done: the agent finished with it and its watcher caught up and
	// ended (under apiAgents.mu).
	done      bool
	stopWatch context.CancelFunc
	// cleared: the last write was a ClearMessages (the view is empty);
	// reverted: a RevertCompaction (the view may be over its window
	// again until the next PrepareContext compacts it).
	cleared, reverted bool
	// shown: the summaries and placeholders the agent's views showed, by
	// id. They are not in the log (it holds what was appended), so a
	// restored or expanded one is compared with the copy shown.
	shown map[string]*contextdv1.Message
}

// show remembers the summaries and placeholders of a view.
func (sess *apiSession) show(view []*contextdv1.Message) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	for _, m := range view {
		if m.GetPosition() == 0 {
			if sess.shown == nil {
				sess.shown = map[string]*contextdv1.Message{}
			}
			sess.shown[m.GetId()] = m
		}
	}
}

// original is what a restored or expanded message must equal: the log's
// copy, or for a summary or placeholder (position 0: not in the log) the
// copy a view showed; ok is false when there is none to compare with.
func (sess *apiSession) original(byID map[string]*contextdv1.Message, m *contextdv1.Message) (*contextdv1.Message, bool) {
	if o, ok := byID[m.GetId()]; ok {
		return o, true
	}
	if m.GetPosition() != 0 {
		return nil, true // an appended message missing from the log
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	o, ok := sess.shown[m.GetId()]
	return o, ok
}

type apiAgents struct {
	s        *soak
	mu       sync.Mutex
	sessions []*apiSession
}

func (a *apiAgents) list() []*apiSession {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.sessions)
}

// grpcRetryable are the codes a client retries (the server or the
// connection was away, or asked to come back). Not Unknown (a handler's
// unmapped error) nor Canceled (the server gave up a call the client did
// not cancel): retrying those would hide them.
func grpcRetryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// call runs fn with retries (8 attempts, exponential backoff with jitter),
// each attempt on the next replica with a 20 s deadline. It returns the
// last error when every attempt failed; a code that is not retryable is
// returned at once and recorded as a problem unless ok says it is
// expected.
func (s *soak) call(ctx context.Context, rpc string, agent int, ok func(error) bool, fn func(context.Context, contextdv1.ContextServiceClient) error) error {
	began := time.Now()
	var last error
	for attempt := 0; attempt < 8; attempt++ {
		if attempt > 0 && !sleepCtx(ctx, backoff(attempt, nil)) {
			return ctx.Err()
		}
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := fn(actx, s.clients[(agent+attempt)%len(s.clients)])
		cancel()
		if err == nil {
			s.rep.ack(rpc, time.Since(began))
			return nil
		}
		if ok != nil && ok(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !grpcRetryable(err) {
			s.rep.problem(invalid, "%s answered %v to a valid request", rpc, err)
			return err
		}
		s.rep.failed(rpc, status.Code(err).String())
		last = err
	}
	return fmt.Errorf("%w: %v", errGaveUp, last)
}

func textMessage(role contextdv1.Role, text string) *contextdv1.Message {
	return &contextdv1.Message{Role: role, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: text}}}}}
}

// keyOf is the «tag» a soak message starts with ("" for other messages:
// summaries, placeholders).
func keyOf(m *contextdv1.Message) string {
	if m.GetKind() != contextdv1.MessageKind_MESSAGE_KIND_NORMAL && m.GetKind() != contextdv1.MessageKind_MESSAGE_KIND_UNSPECIFIED {
		return ""
	}
	for _, p := range m.GetParts() {
		if t := p.GetText().GetText(); strings.HasPrefix(t, "«") {
			if i := strings.Index(t, "»"); i > 0 {
				return t[:i+len("»")]
			}
		}
	}
	return ""
}

func keysOf(msgs []*contextdv1.Message) []string {
	var out []string
	for _, m := range msgs {
		if k := keyOf(m); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// run is one API agent: sessions of up to 30 turns, one after another.
// A turn is PrepareContext (the last reply and a new user message,
// appended atomically, idempotently), the model call (straight to the
// provider, with the SDK's retries), and ReportUsage. Now and then it
// expands a summary, reverts the latest compaction and clears the view,
// and checks what each gave back.
func (a *apiAgents) run(ctx context.Context, agent int) {
	s := a.s
	snippets := s.corpus[(agent+3)%len(s.corpus)]
	next := agent * 11
	for n := 0; ctx.Err() == nil && n < 1000; n++ {
		id := fmt.Sprintf("soak-api-%d-%d", agent, n)
		err := s.call(ctx, "CreateSession", agent, func(err error) bool { return status.Code(err) == codes.AlreadyExists },
			func(ctx context.Context, c contextdv1.ContextServiceClient) error {
				_, err := c.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: id, Model: "soak-gpt", SystemPrompt: "You are a soak-test agent."})
				return err
			})
		if err != nil && status.Code(err) != codes.AlreadyExists {
			s.think(ctx)
			continue
		}
		sess := &apiSession{id: id}
		a.mu.Lock()
		a.sessions = append(a.sessions, sess)
		a.mu.Unlock()
		var wctx context.Context
		wctx, sess.stopWatch = context.WithCancel(s.watchCtx)
		go s.watch(wctx, sess, agent)
		var reply, seen string
		turns := 14 + rand.IntN(16)
		for t := 0; t < turns && ctx.Err() == nil; t++ {
			var msgs []*contextdv1.Message
			if reply != "" {
				msgs = append(msgs, textMessage(contextdv1.Role_ROLE_ASSISTANT, fmt.Sprintf("«a%d.s%d.t%d.r» %s", agent, n, t, reply)))
			}
			msgs = append(msgs, textMessage(contextdv1.Role_ROLE_USER, fmt.Sprintf("«a%d.s%d.t%d.u» %s", agent, n, t, snippets[next%len(snippets)])))
			next++
			in := opInput{session: id, kind: opAppend, keys: keysOf(msgs)}
			s.sent.add(msgs)
			call := s.hist.now()
			var prepared *contextdv1.PrepareContextResponse
			err := s.call(ctx, "PrepareContext", agent, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
				var err error
				prepared, err = c.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: id, Messages: msgs, IdempotencyKey: fmt.Sprintf("%s-t%d", id, t)})
				return err
			})
			if err != nil {
				s.hist.add(in, call, opOutput{unknown: true})
				sess.mu.Lock()
				sess.abandoned = true
				sess.mu.Unlock()
				break
			}
			s.hist.add(in, call, opOutput{keys: keysOf(prepared.GetMessages())})
			sess.show(prepared.GetMessages())
			sess.mu.Lock()
			sess.cleared, sess.reverted = false, false
			sess.mu.Unlock()
			if u := prepared.GetStatus().GetUsage(); u.GetUsedTokens() > u.GetContextWindow() {
				s.rep.problem(invalid, "session %s: PrepareContext returned a view of %d tokens for a window of %d", id, u.GetUsedTokens(), u.GetContextWindow())
			}
			text, in2, out2, err := s.modelCall(ctx, prepared.GetMessages())
			if err != nil {
				reply = ""
				continue
			}
			reply = text
			err = s.call(ctx, "ReportUsage", agent, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
				_, err := c.ReportUsage(ctx, &contextdv1.ReportUsageRequest{SessionId: id, InputTokens: in2, OutputTokens: out2, IdempotencyKey: fmt.Sprintf("%s-t%d-usage", id, t)})
				return err
			})
			if err != nil {
				s.unreported.Add(1)
			}
			last := prepared.GetStatus().GetLastCompaction()
			fresh := last.GetId() != "" && last.GetId() != seen
			seen = last.GetId()
			switch {
			case fresh && rand.IntN(2) == 0:
				// A compaction this agent has not seen yet: revert half
				// of them, expand what the others left.
				if s.revertCheck(ctx, agent, sess, last) {
					sess.mu.Lock()
					sess.reverted = true
					sess.mu.Unlock()
				}
			case fresh || t%2 == 1:
				s.expandCheck(ctx, agent, sess, prepared.GetMessages())
			case t == 10 && agent%2 == 0:
				in := opInput{session: id, kind: opClear}
				call := s.hist.now()
				err := s.call(ctx, "ClearMessages", agent, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
					_, err := c.ClearMessages(ctx, &contextdv1.ClearMessagesRequest{SessionId: id})
					return err
				})
				s.hist.add(in, call, opOutput{unknown: err != nil})
				// The view is empty: the next turn starts with the user.
				reply = ""
				sess.mu.Lock()
				sess.cleared = err == nil
				sess.mu.Unlock()
				if err != nil {
					sess.mu.Lock()
					sess.abandoned = true
					sess.mu.Unlock()
					t = turns
				}
			}
			s.think(ctx)
		}
		if ctx.Err() == nil {
			// The session is done: its watcher must reach its last
			// version, then it ends (the final check covers the
			// sessions still open).
			s.watcherCaughtUp(ctx, sess, agent)
			sess.stopWatch()
			a.mu.Lock()
			sess.done = true
			a.mu.Unlock()
		}
	}
}

// watcherCaughtUp waits at most 20 s for sess's watcher to see the
// session's version.
func (s *soak) watcherCaughtUp(ctx context.Context, sess *apiSession, agent int) {
	var got *contextdv1.GetSessionResponse
	if err := s.call(ctx, "GetSession", agent, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
		var err error
		got, err = c.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: sess.id})
		return err
	}); err != nil {
		return
	}
	want := got.GetSession().GetVersion()
	deadline := time.Now().Add(20 * time.Second)
	for ctx.Err() == nil {
		sess.mu.Lock()
		w := sess.watched
		sess.mu.Unlock()
		if w >= want {
			return
		}
		if time.Now().After(deadline) {
			s.rep.problem(stuck, "watcher of session %s at version %d 20 s after the session reached %d", sess.id, w, want)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// modelCall sends the prepared view to the provider as an OpenAI client
// would (retries as the SDK does) and returns the answer and its usage.
func (s *soak) modelCall(ctx context.Context, view []*contextdv1.Message) (string, int64, int64, error) {
	var msgs []any
	for _, m := range view {
		role := strings.ToLower(strings.TrimPrefix(m.GetRole().String(), "ROLE_"))
		if role == "tool" || role == "system" {
			role = "user"
		}
		var text strings.Builder
		for _, p := range m.GetParts() {
			text.WriteString(p.GetText().GetText())
			text.WriteString(p.GetToolResult().GetContent())
		}
		if text.Len() == 0 {
			text.WriteString("(empty)")
		}
		msgs = append(msgs, map[string]any{"role": role, "content": text.String()})
	}
	body, _ := json.Marshal(map[string]any{"model": "soak-gpt", "messages": msgs})
	began := time.Now()
	var last error
	for attempt := 0; attempt < 8; attempt++ {
		if attempt > 0 && !sleepCtx(ctx, backoff(attempt, last)) {
			return "", 0, 0, ctx.Err()
		}
		text, in, out, err := s.modelAttempt(ctx, body)
		if err == nil {
			s.rep.ack("provider (API agents)", time.Since(began))
			return text, in, out, nil
		}
		var he *httpError
		if errors.As(err, &he) && !retryable(he.status) {
			s.rep.problem(invalid, "the provider refused a prepared view: %v", err)
			return "", 0, 0, err
		}
		s.rep.failed("provider (API agents)", reasonOf(err))
		last = err
	}
	return "", 0, 0, fmt.Errorf("%w: %v", errGaveUp, last)
}

func (s *soak) modelAttempt(ctx context.Context, body []byte) (string, int64, int64, error) {
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(actx, http.MethodPost, s.provider.openAIBase()+"/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-soak")
	resp, err := s.http.Do(req)
	if err != nil {
		return "", 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return "", 0, 0, &httpError{status: resp.StatusCode, body: string(b), retryAfter: time.Duration(ra) * time.Second}
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) == 0 {
		return "", 0, 0, fmt.Errorf("%w: %v", errCut, err)
	}
	return out.Choices[0].Message.Content, out.Usage.Prompt, out.Usage.Completion, nil
}

// logOf reads a session's whole log (every page).
func (s *soak) logOf(ctx context.Context, id string, view contextdv1.MessageView) ([]*contextdv1.Message, error) {
	var all []*contextdv1.Message
	token := ""
	for page := 0; page < 100; page++ {
		var resp *contextdv1.GetMessagesResponse
		err := s.call(ctx, "GetMessages", 0, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
			var err error
			resp, err = c.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: id, View: view, PageSize: 1000, PageToken: token})
			return err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, resp.GetMessages()...)
		if token = resp.GetNextPageToken(); token == "" {
			return all, nil
		}
	}
	return all, fmt.Errorf("more than 100 pages")
}

// expandCheck expands one summary of the view and checks the originals
// it returns are the log's, byte for byte.
func (s *soak) expandCheck(ctx context.Context, agent int, sess *apiSession, view []*contextdv1.Message) {
	id := sess.id
	var summary *contextdv1.Message
	for _, m := range view {
		if m.GetKind() == contextdv1.MessageKind_MESSAGE_KIND_SUMMARY || m.GetKind() == contextdv1.MessageKind_MESSAGE_KIND_PLACEHOLDER {
			summary = m
		}
	}
	if summary == nil {
		return
	}
	// Every page of originals (a summary replaces at least one).
	var originals []*contextdv1.Message
	token := ""
	for page := 0; page < 100; page++ {
		var resp *contextdv1.ExpandMessageResponse
		err := s.call(ctx, "ExpandMessage", agent, func(err error) bool { return status.Code(err) == codes.NotFound },
			func(ctx context.Context, c contextdv1.ContextServiceClient) error {
				var err error
				resp, err = c.ExpandMessage(ctx, &contextdv1.ExpandMessageRequest{SessionId: id, MessageId: summary.GetId(), PageToken: token})
				return err
			})
		if err != nil {
			return
		}
		originals = append(originals, resp.GetOriginals()...)
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(originals) == 0 {
		s.rep.problem(lost, "session %s: ExpandMessage(%s) returned no originals", id, summary.GetId())
		return
	}
	if differ, unsent := s.sent.check(originals); len(differ)+len(unsent) > 0 {
		s.rep.problem(invalid, "session %s: ExpandMessage(%s) returned originals unlike what the agent sent: %v %v", id, summary.GetId(), differ, unsent)
	}
	log, err := s.logOf(ctx, id, contextdv1.MessageView_MESSAGE_VIEW_LOG)
	if err != nil {
		return
	}
	byID := map[string]*contextdv1.Message{}
	for _, m := range log {
		byID[m.GetId()] = m
	}
	for _, m := range originals {
		orig, ok := sess.original(byID, m)
		if !ok {
			continue // a summary no view showed: nothing to compare with
		}
		if orig == nil || !sameContent(orig, m) {
			s.rep.problem(invalid, "session %s: ExpandMessage(%s) returned original %s unlike the log's", id, summary.GetId(), m.GetId())
		}
	}
}

func sameContent(a, b *contextdv1.Message) bool {
	if a.GetRole() != b.GetRole() || len(a.GetParts()) != len(b.GetParts()) {
		return false
	}
	for i := range a.GetParts() {
		if !proto.Equal(a.GetParts()[i], b.GetParts()[i]) {
			return false
		}
	}
	return true
}

// revertCheck reverts the latest compaction when it is a summary (not a
// clear) still in force, and checks that the view then holds the
// messages it replaced, byte-identical to the log.
func (s *soak) revertCheck(ctx context.Context, agent int, sess *apiSession, last *contextdv1.CompactionInfo) (reverted bool) {
	id := sess.id
	if last.GetId() == "" || last.GetRevertedAt() != nil || slices.Contains(last.GetTiers(), "clear") {
		return false
	}
	var replaced []string
	var list *contextdv1.ListCompactionsResponse
	if err := s.call(ctx, "ListCompactions", agent, nil, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
		var err error
		list, err = c.ListCompactions(ctx, &contextdv1.ListCompactionsRequest{SessionId: id})
		return err
	}); err != nil {
		return false
	}
	for _, c := range list.GetCompactions() {
		if c.GetId() == last.GetId() {
			for _, it := range c.GetItems() {
				replaced = append(replaced, it.GetReplacedMessageIds()...)
			}
		}
	}
	// A revert that loses to a newer compaction, or whose compaction was
	// already reverted by a retry that committed, is refused: expected.
	expected := func(err error) bool {
		c := status.Code(err)
		return c == codes.FailedPrecondition || c == codes.NotFound || c == codes.Aborted
	}
	err := s.call(ctx, "RevertCompaction", agent, expected, func(ctx context.Context, c contextdv1.ContextServiceClient) error {
		_, err := c.RevertCompaction(ctx, &contextdv1.RevertCompactionRequest{SessionId: id, CompactionId: last.GetId()})
		return err
	})
	if err != nil {
		return false
	}
	reverted = true
	view, err1 := s.logOf(ctx, id, contextdv1.MessageView_MESSAGE_VIEW_ACTIVE)
	log, err2 := s.logOf(ctx, id, contextdv1.MessageView_MESSAGE_VIEW_LOG)
	if err1 != nil || err2 != nil {
		return true
	}
	inView := map[string]*contextdv1.Message{}
	for _, m := range view {
		inView[m.GetId()] = m
	}
	byID := map[string]*contextdv1.Message{}
	for _, m := range log {
		byID[m.GetId()] = m
	}
	for _, rid := range replaced {
		got, ok := inView[rid]
		if !ok {
			// A newer compaction of the agent's own next call cannot have
			// run (the agent is between calls); a background job may
			// have compacted it again only through a later prepare.
			s.rep.problem(invalid, "session %s: after RevertCompaction(%s), original %s is not in the view", id, last.GetId(), rid)
			continue
		}
		orig, ok := sess.original(byID, got)
		if ok && (orig == nil || !sameContent(got, orig)) {
			s.rep.problem(invalid, "session %s: RevertCompaction(%s) restored %s unlike the log's original", id, last.GetId(), rid)
		}
	}
	return true
}

// watch follows a session's status as a client library does: on any
// error it reconnects (to the next replica) from the last version seen.
func (s *soak) watch(ctx context.Context, sess *apiSession, agent int) {
	defer s.guard()
	for attempt := 0; ctx.Err() == nil && attempt < 100000; attempt++ {
		sess.mu.Lock()
		from := sess.watched
		sess.mu.Unlock()
		c := s.clients[(agent+attempt)%len(s.clients)]
		st, err := c.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{SessionId: sess.id, FromVersion: from})
		if err == nil {
			for {
				resp, err := st.Recv()
				if err != nil {
					break
				}
				sess.mu.Lock()
				sess.watched = max(sess.watched, resp.GetStatus().GetVersion())
				sess.mu.Unlock()
			}
		}
		if !sleepCtx(ctx, time.Duration(200+rand.IntN(800))*time.Millisecond) {
			return
		}
	}
}
