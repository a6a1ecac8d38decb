package gateway_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/pgtest"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestClientCompactsToTheSameHistoryTwice: a signalled conversation
// (Codex CLI's Session_id) that compacts its own history goes on in a fork
// of its session; when it compacts again to the very same history (the
// same opening and the same summary: a deterministic summarizer, or a
// summary the model happened to write alike) that history is a rewind of
// the first fork, which went on since. The request must land in a session
// of its own, its retry be answered as a repeat there, and the
// conversation go on in it. Without the fix the fork's id, derived from
// the signal and the history alone, named the first fork again
// (CreateSession answers a create of an existing id with the same settings
// as made): the request was answered from that fork, its retry too, and
// the next request forked again ("edited"). With Codex CLI (test/clients
// on SQLite, 16k window, 40 KB tool outputs) the request after Codex's
// second compaction met a version conflict on every try: 409 until Codex
// gave up. The test runs on PostgreSQL; it fails without the fix on
// SQLite too.
func TestClientCompactsToTheSameHistoryTwice(t *testing.T) {
	s := start(t, map[string]string{"CONTEXTD_DATABASE_URL": pgtest.URL(t)})
	header := map[string]string{"Session_id": "019a0000-0000-7000-8000-000000000029"}
	user := func(text string) map[string]any { return map[string]any{"role": "user", "content": text} }
	reply := func(text string) map[string]any {
		return map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": text}}}
	}
	opening := user("Work through the checks, then report.")
	summary := user("Summary of the conversation so far: parts 1 to 4 checked, all values agree.")
	sessions := map[string]bool{}
	// post sends the request twice (the client's retry): the first lands
	// as want says, in a session no earlier step used when fresh; the
	// retry is answered from the same session as the request again.
	post := func(step string, input []any, want string, fresh bool) {
		t.Helper()
		first := ""
		for try := range 2 {
			s.fake.Script(gatewaytest.Reply{Text: step + " done"})
			resp, out := s.post("/v1/responses", map[string]any{"model": "gpt-4o", "input": input}, header)
			if resp.StatusCode != 200 {
				t.Fatalf("%s (try %d): %d %s", step, try, resp.StatusCode, out)
			}
			id, history := resp.Header.Get("X-Contextd-Session"), resp.Header.Get("X-Contextd-History")
			t.Logf("%s (try %d): session %s, history %q", step, try, id, history)
			if try == 0 {
				first = id
				if !strings.HasPrefix(history, want) {
					t.Errorf("%s: history %q, want %q", step, history, want)
				}
				if fresh && sessions[id] {
					t.Errorf("%s: landed in %s, a session an earlier step used", step, id)
				}
				sessions[id] = true
			} else if id != first || history != "repeated" {
				t.Errorf("%s, retried: session %s, history %q; want %s, \"repeated\"", step, id, history, first)
			}
		}
	}
	var input []any
	for i := range 3 {
		input = append(input, user(fmt.Sprintf("round %d: %s", i, bigResult(i))))
		want := "extended"
		if i == 0 {
			want = "new"
		}
		post(fmt.Sprintf("round %d", i), input, want, i == 0)
		input = append(input, reply(fmt.Sprintf("round %d done", i)))
	}
	for c := range 3 {
		// The client replaces its history by the opening and the summary,
		// then goes on from there.
		input = []any{opening, summary}
		want := "rewound"
		if c == 0 {
			want = "forked"
		}
		post(fmt.Sprintf("compaction %d", c), input, want, true)
		last := fmt.Sprintf("compaction %d", c)
		for i := range 2 {
			step := fmt.Sprintf("compaction %d step %d", c, i)
			input = append(input, reply(last+" done"), user(fmt.Sprintf("%s: %s", step, bigResult(i))))
			post(step, input, "extended", false)
			last = step
		}
	}
	s.checkUpstream()
}
