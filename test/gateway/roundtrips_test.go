package gateway_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// maxRoundTrips is what a gateway request of a growing Chat Completions
// conversation may cost in round trips to PostgreSQL, its recording
// included: 33.05 on the parent of issue 30's second pass, 28.05 once the
// gateway matched sessions by their row and each transaction's messages
// and history entries went in one batch, 27.05 once PrepareContext started
// from the row the match read, 25.05 once the tenant's log quota was read
// only after each insert, 26.05 with client edits (clientedit.go: the
// view they are looked for in is verified against the session row once,
// before PrepareContext, whose own view read it then saves), 25.05 once a
// request whose client edits recorded nothing passes PrepareContext the
// row its match read (the view they were looked for in is the one the
// recording cached, TestViewCacheFollowsRecordedExchange: nothing read),
// 23.05 once the gateway's append carried no idempotency key (its
// expected version alone keeps a request from being stored twice), 12.05
// once each transaction was pipelined (BEGIN with the first statement;
// PrepareContext's and RecordExchange's writes queued and sent with their
// next read or with COMMIT, store.Pipelined), 8.05 once the open tool
// calls and the hints row were read with the session's lock
// (store.ReadAhead) and a multi-row read carried the writes queued before
// it, 6.05 once the tenant's log quota was checked by a statement that
// rides with COMMIT (store.Tx.CheckLogBytes), 5.05 once the session this
// replica served the conversation in last was confirmed by the history
// index and its row in one pipeline (store.HistoryRowFinder), 4.05 once
// the recording started from the row and open tool calls PrepareContext
// committed, its lock checked by the server with its writes and COMMIT
// (store.ReadAhead.Held), 3.05 once PrepareContext started from the row,
// open tool calls and hints row the last recording committed, 2.05 once
// the match took that row too and the index's lookup of the request's new
// chains went with PrepareContext's lock (store.ReadAhead.NoHeads) — see
// docs/performance.md.
const maxRoundTrips = 2.5

// TestGatewayRoundTripsToPostgres counts, through a proxy in front of a
// real PostgreSQL (pgtest.RoundTrips: each Sync and simple Query), the
// round trips of the gateway's requests of one conversation that grows by
// an exchange per call, once the session exists and its statements are
// prepared: identify, PrepareContext, the recording of the reply. The
// background compaction workers, which poll the database while idle, are
// off, so the count is the requests' own (nothing on the request path
// reads the jobs of a session that never nears its window).
func TestGatewayRoundTripsToPostgres(t *testing.T) {
	t.Run("chat", func(t *testing.T) { roundTrips(t, 1, growingChatOn, maxRoundTrips) })
	// An agent's rounds: every other reply is a tool call, and the next
	// request carries its result (the lookups of the calls by id, guessed
	// from the open calls and checked with the writes: 3.05 before).
	t.Run("tools", func(t *testing.T) { roundTrips(t, 1, growingToolChatOn, maxRoundTrips) })
	// A round-robin balancer in front of two replicas: each request's
	// replica served the one before last, so the row it holds is stale.
	t.Run("two replicas alternating", func(t *testing.T) { roundTrips(t, 2, growingChatOn, maxRoundTripsAlternating) })
}

// maxRoundTripsAlternating bounds TestGatewayRoundTripsToPostgres' two
// replicas alternating, each request sent once the last one's recording
// settled: 22.10 when each request guessed the row its replica held
// (stale: the other replica wrote since), failing its transaction; 11.10
// once a session whose held row was found stale is matched by a read
// (store/postgres heldRows.shared); 9.10 once the match by the head this
// replica saw takes the session when its own head is among the request's
// new chains (it grew on the other replica), instead of the whole lookup
// (lastserved.go); 8.10–8.65 once the log cache's tail read took the row
// the match read (Engine.LogTailOf); 7.10–7.65 once the view cache's tail
// and its confirming row went in one pipeline (store.ViewTailReader). The
// bound holds the first two cuts; runs vary by half a round trip.
// docs/performance.md, the ninth pass.
const maxRoundTripsAlternating = 9.5

// roundTrips measures the round trips per request of a conversation
// whose i-th request goes to the i-th of n replicas in turn.
func roundTrips(t *testing.T, n int, conversation func(pick func(int) *server) func(int), maxRoundTrips float64) {
	url, count := pgtest.RoundTrips(t, pgtest.URL(t))
	var replicas []*server
	for range n {
		replicas = append(replicas, start(t, map[string]string{"CONTEXTD_DATABASE_URL": url, "CONTEXTD_BACKGROUND_COMPACTION": "false"}))
	}
	call := conversation(func(i int) *server { return replicas[i%n] })
	settled := func() int64 { return settledCount(count) }
	const warm, measured = 5, 20
	for i := range warm {
		call(i)
	}
	// Whatever the server does while no request comes (a pool's health
	// check) is subtracted at its rate over the measured time.
	idle0, i0 := settled(), time.Now()
	time.Sleep(2 * time.Second)
	idle := float64(settled()-idle0) / time.Since(i0).Seconds()
	c0, t0 := settled(), time.Now()
	var busy time.Duration // the requests' own time, not the waits between them
	for i := range measured {
		start := time.Now()
		call(warm + i)
		busy += time.Since(start)
		if n > 1 {
			settled() // the next replica starts after this one's recording: the count holds from run to run
		}
	}
	total := settled()
	perRequest := (float64(total-c0) - idle*time.Since(t0).Seconds()) / measured
	t.Logf("%.2f round trips to PostgreSQL per gateway request (%d requests; %.1f per second while idle, subtracted); %.2f ms a request",
		perRequest, measured, idle, float64(busy.Microseconds())/1000/measured)
	if perRequest > maxRoundTrips {
		t.Errorf("%.2f round trips per gateway request, want at most %.1f", perRequest, maxRoundTrips)
	}
}

// growingChat is a Chat Completions conversation of a system prompt and
// 40 messages that grows by an exchange per call (i names the step and
// the fake's answer): the requests whose store work the counting tests
// measure.
func (s *server) growingChat() func(i int) {
	return growingChatOn(func(int) *server { return s })
}

// growingChatOn is growingChat with its i-th request sent to pick(i).
func growingChatOn(pick func(int) *server) func(i int) {
	history := []any{map[string]any{"role": "system", "content": "You are a coding agent."}}
	for i := range 40 {
		history = append(history, map[string]any{"role": []string{"user", "assistant"}[i%2], "content": fmt.Sprintf("message %d", i)})
	}
	return func(i int) {
		s := pick(i)
		s.t.Helper()
		history = append(history, map[string]any{"role": "user", "content": fmt.Sprintf("step %d", i)})
		answer := fmt.Sprintf("answer %d", i)
		s.fake.Script(gatewaytest.Reply{Text: answer})
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4.1", "messages": history}, nil)
		if resp.StatusCode != http.StatusOK {
			s.t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
		history = append(history, map[string]any{"role": "assistant", "content": answer})
	}
}

// growingToolChatOn is growingChatOn as an agent's rounds: an even step's
// request ends with a user message and its reply is a tool call; an odd
// step's request carries that call and its result, and its reply is text.
func growingToolChatOn(pick func(int) *server) func(i int) {
	history := []any{map[string]any{"role": "system", "content": "You are a coding agent."}}
	for i := range 40 {
		history = append(history, map[string]any{"role": []string{"user", "assistant"}[i%2], "content": fmt.Sprintf("message %d", i)})
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "ls",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}}}
	return func(i int) {
		s := pick(i)
		s.t.Helper()
		var reply gatewaytest.Reply
		var answer map[string]any
		if i%2 == 0 {
			history = append(history, map[string]any{"role": "user", "content": fmt.Sprintf("step %d", i)})
			call := gatewaytest.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "ls", Arguments: fmt.Sprintf(`{"path":"src/%d"}`, i)}
			reply = gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{call}}
			answer = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": call.ID, "type": "function", "function": map[string]any{"name": call.Name, "arguments": call.Arguments}}}}
		} else {
			history = append(history, map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("call_%d", i-1),
				"content": fmt.Sprintf("main_%d.go", i)})
			reply = gatewaytest.Reply{Text: fmt.Sprintf("answer %d", i)}
			answer = map[string]any{"role": "assistant", "content": reply.Text}
		}
		s.fake.Script(reply)
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4.1", "messages": history, "tools": tools}, nil)
		if resp.StatusCode != http.StatusOK {
			s.t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
		history = append(history, answer)
	}
}

// settledCount is count once it has not moved for 300 ms (the last call's
// recording done).
func settledCount(count func() int64) int64 {
	last := count()
	for still := time.Now(); time.Since(still) < 300*time.Millisecond; {
		time.Sleep(20 * time.Millisecond)
		if n := count(); n != last {
			last, still = n, time.Now()
		}
	}
	return last
}
