package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

// Client edits and picks past the tenant's log quota
// (CONTEXTD_MAX_LOG_BYTES_PER_TENANT): the client's versions of stored
// messages are left out and the request goes on without them (their
// bytes still go upstream); a pick never is — the request joins the
// session by it, and the message after it tells every replica's log cache
// so — so a request whose pick the quota cannot take fails, changing
// nothing, and succeeds as a pick once there is room.

// quotaBytes is the tenant's log quota in these tests.
const quotaBytes = 4 << 20

// leaveQuota leaves the tenant left bytes of its log quota, as if its
// other sessions held the rest: tenant_usage is the counter the log's
// triggers keep and the quota reads (one tenant in the test's database).
func leaveQuota(t *testing.T, url string, left int64) {
	t.Helper()
	ctx := t.Context()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	tag, err := db.Exec(ctx, `UPDATE tenant_usage SET log_bytes = $1`, quotaBytes-left)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("tenant_usage: %v, %d rows", err, tag.RowsAffected())
	}
}

// growCalls rewrites the arguments of body's tool calls (a chat request)
// to 16 KB each: the client's versions of its old calls (the same calls,
// other arguments, as Claude Code fills schema defaults into them).
func growCalls(body map[string]any) map[string]any {
	for _, m := range body["messages"].([]any) {
		calls, _ := m.(map[string]any)["tool_calls"].([]any)
		for _, c := range calls {
			fn := c.(map[string]any)["function"].(map[string]any)
			fn["arguments"] = `{"path":"` + strings.Repeat("dir/", 4096) + `file.go"}`
		}
	}
	return body
}

// compactionTiers are the tiers of each compaction of session id.
func (s *server) compactionTiers(id string) [][]string {
	s.t.Helper()
	var cmps struct {
		Compactions []struct {
			Tiers []string `json:"tiers"`
		} `json:"compactions"`
	}
	s.rpc("ListCompactions", map[string]any{"sessionId": id}, &cmps)
	var out [][]string
	for _, c := range cmps.Compactions {
		out = append(out, c.Tiers)
	}
	return out
}

// activeTexts are the texts of the active view's assistant messages.
func (s *server) activeTexts(id string) []string {
	s.t.Helper()
	var out []string
	for _, m := range s.messagesOf(id, "MESSAGE_VIEW_ACTIVE") {
		for _, p := range m.Parts {
			if p.Text != nil && m.Role == "ROLE_ASSISTANT" {
				out = append(out, p.Text.Text)
			}
		}
	}
	return out
}

func TestEditsPastTheLogQuota(t *testing.T) {
	d := editDoors["chat"]
	const first, second, third = "the first choice", "the second choice, kept", "the third choice"
	choices := gatewaytest.Reply{Text: first, More: []gatewaytest.Reply{{Text: second}, {Text: third}}}
	kept := map[string]any{"role": "assistant", "content": second}

	// The client rewrites its five old calls (80 KB more) and goes on:
	// the quota has room for the append, not for the edits. They are left
	// out; the request is served in its session, its bytes upstream.
	t.Run("client-edits", func(t *testing.T) {
		url := pgtest.URL(t)
		s := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url, "CONTEXTD_MAX_LOG_BYTES_PER_TENANT": strconv.Itoa(quotaBytes)})
		s.fake.Script(gatewaytest.Reply{Text: "found it"}, gatewaytest.Reply{Text: "fixed"})
		resp, raw := s.post(d.path, d.body(bigResult), map[string]string{"X-Contextd-Session": "edits"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("first: %d %s", resp.StatusCode, raw)
		}
		id := resp.Header.Get("X-Contextd-Session")
		s.waitLogLen(id, 12)
		leaveQuota(t, url, 16000)
		resp, raw = s.post(d.path, growCalls(d.body(bigResult, append(d.reply(raw), d.question)...)), map[string]string{"X-Contextd-Session": "edits"})
		if h := resp.Header.Get("X-Contextd-History"); resp.StatusCode != http.StatusOK || h != "extended" {
			t.Fatalf("second: %d history %q, want extended: %.500s", resp.StatusCode, h, raw)
		}
		if up := string(s.fake.Requests()[1].Raw); !strings.Contains(up, "dir/dir/") {
			t.Errorf("upstream did not get the client's versions of the calls")
		}
		s.waitLogLen(id, 14)
		if n := len(s.logOf(id)); n != 14 {
			t.Errorf("the log holds %d messages, want 14 (the reply and the question appended)", n)
		}
		if tiers := s.compactionTiers(id); len(tiers) != 0 {
			t.Errorf("compactions %v: the edits past the quota were recorded", tiers)
		}
	})

	// The client keeps the second of three choices and rewrites its old
	// calls: the quota has room for the pick and the append, not the
	// rewrites. The pick is recorded (the client's choice upstream and in
	// the view), the rewrites are not. Before, both were left out: the
	// session went on with the first choice in the client's place,
	// upstream and in the view, for good (the message after it said the
	// client's version stood there).
	t.Run("pick-and-client-edits", func(t *testing.T) {
		url := pgtest.URL(t)
		s := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url, "CONTEXTD_MAX_LOG_BYTES_PER_TENANT": strconv.Itoa(quotaBytes)})
		s.fake.Script(choices, gatewaytest.Reply{Text: "fixed"}, gatewaytest.Reply{Text: "done"})
		body := d.body(bigResult)
		body["n"] = 3
		resp, raw := s.post(d.path, body, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("first: %d %s", resp.StatusCode, raw)
		}
		id := resp.Header.Get("X-Contextd-Session")
		s.waitLogLen(id, 12)
		leaveQuota(t, url, 16000)
		resp, raw = s.post(d.path, growCalls(d.body(bigResult, kept, d.question)), nil)
		if h := resp.Header.Get("X-Contextd-History"); resp.StatusCode != http.StatusOK || h != "extended" {
			t.Fatalf("second: %d history %q, want extended: %.500s", resp.StatusCode, h, raw)
		}
		if up := string(s.fake.Requests()[1].Raw); !strings.Contains(up, second) || strings.Contains(up, first) {
			t.Errorf("upstream did not get the client's choice in place of the first: %.300s", up[max(0, len(up)-300):])
		}
		s.waitLogLen(id, 14)
		if texts := s.activeTexts(id); !slices.Contains(texts, second) || slices.Contains(texts, first) {
			t.Errorf("the active view's replies are %q, want the client's choice in place of the first", texts)
		}
		if tiers := s.compactionTiers(id); len(tiers) != 1 || !slices.Equal(tiers[0], []string{"client_edit"}) {
			t.Errorf("compactions %v, want the pick alone", tiers)
		}
	})

	// The client keeps the second of three choices, a long one: the quota
	// has room for the append, not for the pick. The request fails and
	// changes nothing; with room again, the same request is the pick.
	// Before, it was served with the first choice in the client's place.
	t.Run("pick", func(t *testing.T) {
		url := pgtest.URL(t)
		s := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url, "CONTEXTD_MAX_LOG_BYTES_PER_TENANT": strconv.Itoa(quotaBytes)})
		long := second + strings.Repeat(" and more", 4000) // 36 KB
		s.fake.Script(gatewaytest.Reply{Text: first, More: []gatewaytest.Reply{{Text: long}, {Text: third}}}, gatewaytest.Reply{Text: "noted"})
		msgs := func(tail ...any) map[string]any {
			return map[string]any{"model": "gpt-4o", "messages": append([]any{map[string]any{"role": "user", "content": "Describe the service"}}, tail...)}
		}
		body := msgs()
		body["n"] = 3
		resp, raw := s.post(d.path, body, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("first: %d %s", resp.StatusCode, raw)
		}
		id := resp.Header.Get("X-Contextd-Session")
		s.waitLogLen(id, 2)
		before := s.logOf(id)
		leaveQuota(t, url, 16000)
		next := msgs(map[string]any{"role": "assistant", "content": long}, map[string]any{"role": "user", "content": "Shorter"})
		resp, raw = s.post(d.path, next, nil)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("the pick past the quota: %d %.300s; want 429, nothing recorded", resp.StatusCode, raw)
			if len(s.fake.Requests()) > 1 {
				if up := string(s.fake.Requests()[1].Raw); !strings.Contains(up, jsonText(long)) {
					t.Errorf("upstream got the first choice in place of the client's: %.300s", up)
				}
			}
		}
		if got := s.waitLog(id, before); !slices.Equal(got, before) {
			t.Errorf("the log is %q after the failed request, was %q", got, before)
		}
		if tiers := s.compactionTiers(id); len(tiers) != 0 {
			t.Errorf("compactions %v after the failed request, want none", tiers)
		}
		if texts := s.activeTexts(id); !slices.Equal(texts, []string{first}) {
			t.Errorf("the active view's replies are %.200q after the failed request, want the first choice", texts)
		}
		if t.Failed() {
			return
		}
		leaveQuota(t, url, quotaBytes/2)
		resp, raw = s.post(d.path, next, nil)
		if h := resp.Header.Get("X-Contextd-History"); resp.StatusCode != http.StatusOK || h != "extended" {
			t.Fatalf("with room: %d history %q, want extended: %.300s", resp.StatusCode, h, raw)
		}
		if up := string(s.fake.Requests()[1].Raw); !strings.Contains(up, jsonText(long)) || strings.Contains(up, first) {
			t.Errorf("upstream did not get the client's choice in place of the first")
		}
		if tiers := s.compactionTiers(id); len(tiers) != 1 {
			t.Errorf("compactions %v, want the pick", tiers)
		}
	})
}
