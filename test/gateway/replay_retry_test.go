package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/pgtest"
)

// TestLongReplayRetriedAfterAFailedPiece: a long history is appended in
// pieces (replayLong); when a later piece fails, the pieces before it stay,
// and the client's retry finds them stored and appends the rest, split
// from where they end. Each message is stored once. Fails before: each
// piece carried the idempotency key "request key - piece index", so the
// retry's first piece (other messages) reused the first attempt's first
// key and was refused ("used for a different request") while that record
// lived.
//
// The failure is made, not hoped for: a trigger of the test's refuses to
// store a message saying "POISON" until the test drops it.
func TestLongReplayRetriedAfterAFailedPiece(t *testing.T) {
	url := pgtest.URL(t)
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "tiny", "provider": "openai", "context_window": 2000, "max_output_tokens": 200, "encoding": "o200k_base", "exact": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_DATABASE_URL": url, "CONTEXTD_MODELS_FILE": models})
	ctx := t.Context()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	for _, q := range []string{
		`CREATE FUNCTION test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN IF NEW.parts LIKE '%POISON%' THEN RAISE EXCEPTION 'poisoned'; END IF; RETURN NEW; END $$`,
		`CREATE TRIGGER test_poison BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION test_poison()`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	// About 40 turns of 1,000 bytes: a piece (6,000 bytes at this window)
	// holds about three, so the poisoned turn 20 is in a later piece with
	// several after it.
	var msgs []any
	for i := range 40 {
		say := fmt.Sprintf("turn %d: %s", i, strings.Repeat("the parser reads tokens one by one ", 28))
		if i == 20 {
			say += " POISON"
		}
		msgs = append(msgs,
			map[string]any{"role": "user", "content": say},
			map[string]any{"role": "assistant", "content": fmt.Sprintf("answer %d", i)})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "and now?"})
	body := map[string]any{"model": "tiny", "messages": msgs}
	named := map[string]string{"X-Contextd-Session": "replay"}

	if resp, raw := s.post("/v1/chat/completions", body, named); resp.StatusCode == http.StatusOK {
		t.Fatalf("the poisoned replay was served: %s", raw)
	}
	if _, err := db.Exec(ctx, `DROP TRIGGER test_poison ON messages`); err != nil {
		t.Fatal(err)
	}
	resp, raw := s.post("/v1/chat/completions", body, named)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the retry: %d %s", resp.StatusCode, raw)
	}

	seen := map[string]int{}
	for _, line := range s.logOf("replay") {
		if i := strings.Index(line, "turn "); strings.HasPrefix(line, "user: ") && i >= 0 {
			seen[strings.Fields(line[i:])[1]]++
		}
	}
	for i := range 40 {
		if n := seen[fmt.Sprintf("%d:", i)]; n != 1 {
			t.Errorf("turn %d stored %d times, want once", i, n)
		}
	}
}
