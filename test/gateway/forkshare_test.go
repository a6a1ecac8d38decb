package gateway_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store/sqlite"
)

// bigModels is a registry file with a window a 1 MB history fits in, so
// the fork is stored as the client sent it, without compaction.
const bigModels = `{"models": [
 {"name": "big-gpt", "provider": "openai", "context_window": 1000000, "max_output_tokens": 2000, "encoding": "o200k_base", "exact": true}]}`

// longText is about size bytes of text that message i alone says.
func longText(i, size int) string {
	var b strings.Builder
	for line := 0; b.Len() < size; line++ {
		fmt.Fprintf(&b, "message %d, line %d: the build of module %d failed at step %d\n", i, line, i, line*7+i)
	}
	return b.String()
}

// TestForkSharesHistory: a client rewinds a conversation of about 1 MB
// (ten 100 KB questions and their answers), edits its ninth question and
// goes on: a fork. The fork's shared history is stored once: the bytes
// the database holds grow by well under 1 % of the shared bytes (before,
// the fork stored a full copy: 100 %). Through the fork, a shared message
// expands to the original, a compaction summarizes shared messages (whose
// originals expand in full) and its revert brings the fork's view back,
// message for message. Then the parent is deleted: the fork keeps every
// message. Both ways a fork is made: found by its history (no signal),
// and the fork of the caller's own session (X-Contextd-Session, freeFork).
// On SQLite and PostgreSQL (a real cluster); the test reads tenant_usage
// and deletes the parent's row as retention's purge does.
func TestForkSharesHistory(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for name, header := range map[string]map[string]string{"history": nil, "signal": {"X-Contextd-Session": "conv-1"}} {
			t.Run(backend+"/"+name, func(t *testing.T) { forkSharesHistory(t, backend, header) })
		}
	}
}

func forkSharesHistory(t *testing.T, backend string, header map[string]string) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(bigModels), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CONTEXTD_MODELS_FILE": models}
	driver, dsn := "pgx", ""
	if backend == "postgres" {
		dsn = pgtest.URL(t)
		env["CONTEXTD_DATABASE_URL"] = dsn
	} else {
		dir := t.TempDir()
		env["CONTEXTD_DATA_DIR"] = dir
		driver, dsn = "sqlite", filepath.Join(dir, sqlite.FileName)+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	}
	s := start(t, env)
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := func() int64 {
		t.Helper()
		var n int64
		if err := db.QueryRow(`SELECT coalesce(sum(log_bytes), 0) FROM tenant_usage`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const turns, size = 10, 100_000
	var msgs []any
	ask := func(text string, reply string) string {
		t.Helper()
		msgs = append(msgs, map[string]any{"role": "user", "content": text})
		s.fake.Script(gatewaytest.Reply{Text: reply})
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "big-gpt", "messages": msgs}, header)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %.500s", resp.StatusCode, body)
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": reply})
		return resp.Header.Get("X-Contextd-Session") + " " + strings.TrimSuffix(strings.Fields(resp.Header.Get("X-Contextd-History"))[0], ";")
	}
	parent := ""
	for i := range turns {
		got := ask(longText(i, size), fmt.Sprintf("answer %d", i))
		if i == 0 {
			if parent = strings.Fields(got)[0]; header != nil && parent != header["X-Contextd-Session"] {
				t.Fatalf("the conversation is in %q, not the session it names", parent)
			}
		}
	}
	s.waitLogLen(parent, 2*turns)
	before := stored()

	// The client edits its ninth question and goes on.
	msgs = msgs[:2*(turns-2)]
	got := strings.Fields(ask("the ninth question, asked again another way", "another answer"))
	if len(got) != 2 || got[1] != "edited" || got[0] == parent {
		t.Fatalf("the edit landed as %q; want a new session, edited", got)
	}
	fork := got[0]
	s.waitLogLen(fork, 2*turns-2)
	shared := int64((turns - 2) * size)
	added := stored() - before
	t.Logf("a fork sharing %d bytes added %d (%.3f %%)", shared, added, 100*float64(added)/float64(shared))
	if added*100 > shared {
		t.Errorf("the fork added %d bytes for %d shared; want under 1 %%", added, shared)
	}

	// The fork's history is indexed: the conversation goes on in it.
	if got := strings.Fields(ask("and then?", "then this")); got[len(got)-1] != "extended" {
		t.Errorf("the turn after the fork landed as %q, not extended", got)
	}
	s.waitLogLen(fork, 2*turns)
	if n := len(s.logOf(fork)); n != 2*turns {
		t.Errorf("the fork's log holds %d messages, want %d", n, 2*turns)
	}

	// A shared message, expanded through the fork, is the original.
	var x struct {
		Message editedMessage `json:"message"`
	}
	s.rpc("ExpandMessage", map[string]any{"sessionId": fork, "messageId": "msg_3"}, &x)
	if len(x.Message.Parts) != 1 || x.Message.Parts[0].Text == nil || x.Message.Parts[0].Text.Text != longText(1, size) {
		t.Errorf("msg_3 of the fork expanded to %d parts, not the second question", len(x.Message.Parts))
	}

	// A compaction in the fork, its expand and its revert.
	view := texts(s.messagesOf(fork, "MESSAGE_VIEW_ACTIVE"))
	var c struct {
		Compacted  bool `json:"compacted"`
		Compaction struct {
			ID    string `json:"id"`
			Items []struct {
				NewID string `json:"newMessageId"`
			} `json:"items"`
		} `json:"compaction"`
	}
	s.rpc("Compact", map[string]any{"sessionId": fork, "tier": "COMPACTION_TIER_SUMMARIZE", "target": 0.01}, &c)
	if !c.Compacted || len(c.Compaction.Items) == 0 {
		t.Fatalf("the fork's compaction compacted nothing: %+v", c)
	}
	var summary struct {
		Originals []editedMessage `json:"originals"`
	}
	s.rpc("ExpandMessage", map[string]any{"sessionId": fork, "messageId": c.Compaction.Items[0].NewID}, &summary)
	questions := 0
	for _, text := range texts(summary.Originals) {
		var k int
		if _, err := fmt.Sscanf(text, "message %d,", &k); err != nil {
			continue
		}
		if questions++; text != longText(k, size) {
			t.Errorf("the summary's original question %d is %d bytes, not the %d asked", k, len(text), len(longText(k, size)))
		}
	}
	if questions == 0 {
		t.Errorf("the summary's %d originals hold none of the shared questions", len(summary.Originals))
	}
	s.rpc("RevertCompaction", map[string]any{"sessionId": fork, "compactionId": c.Compaction.ID}, nil)
	if after := texts(s.messagesOf(fork, "MESSAGE_VIEW_ACTIVE")); strings.Join(after, "\x00") != strings.Join(view, "\x00") {
		t.Errorf("the reverted fork's view has %d messages, not the %d it had", len(after), len(view))
	}

	// The parent goes: the fork keeps its messages.
	s.rpc("DeleteSession", map[string]any{"sessionId": parent}, nil)
	if _, err := db.Exec(`DELETE FROM sessions WHERE id = '` + parent + `'`); err != nil { // what retention's purge does at its cutoff
		t.Fatal(err)
	}
	var left int
	if err := db.QueryRow(`SELECT count(*) FROM messages WHERE session_id = '` + parent + `'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("the parent's messages did not go with it: %d left (%v)", left, err)
	}
	if after := texts(s.messagesOf(fork, "MESSAGE_VIEW_LOG")); len(after) != 2*turns || after[2] != longText(1, size) {
		t.Errorf("after its parent went, the fork's log holds %d messages (the second: %d bytes)", len(after), len(after[min(2, len(after)-1)]))
	}
	s.checkUpstream()
}

// texts are the messages' texts, in order.
func texts(msgs []editedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		for _, p := range m.Parts {
			if p.Text != nil {
				out[i] += p.Text.Text
			}
		}
	}
	return out
}
