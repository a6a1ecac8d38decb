package app

import (
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/auth"
)

// TestHostileKeysFile: an operator revoking a key while the keys file is
// broken, deleted or lists a digest twice; the server fails closed each time
// (Unauthenticated for the key in doubt), and the tenant's session is intact
// for a key still in force. On both stores.
func TestHostileKeysFile(t *testing.T) {
	onBothStoresEnv(t, map[string]string{"CONTEXTD_API_KEYS_RELOAD": "50ms"}, func(t *testing.T, env map[string]string) {
		file := keysFile(t, keyLine("a", "acme", "k-a", false), keyLine("b", "acme", "k-b", false))
		env["CONTEXTD_API_KEYS_FILE"] = file
		client := contextdv1.NewContextServiceClient(startServer(t, env))
		ctx := t.Context()
		if _, err := client.CreateSession(as(ctx, "k-a"), &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.AppendMessages(as(ctx, "k-a"), &contextdv1.AppendMessagesRequest{SessionId: "s", Messages: []*contextdv1.Message{user("hello")}}); err != nil {
			t.Fatal(err)
		}
		write := func(lines ...string) {
			t.Helper()
			rewriteKeys(t, file, lines...)
		}
		get := func(key string) (*contextdv1.GetMessagesResponse, error) {
			return client.GetMessages(as(ctx, key), &contextdv1.GetMessagesRequest{SessionId: "s"})
		}
		refused := func(what, key string) {
			t.Helper()
			var err error
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if _, err = get(key); status.Code(err) == codes.Unauthenticated {
					return
				}
			}
			t.Fatalf("%s: %s still answers %v", what, key, err)
		}
		accepted := func(what, key string) {
			t.Helper()
			var err error
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if _, err = get(key); err == nil {
					return
				}
			}
			t.Fatalf("%s: %s still refused: %v", what, key, err)
		}
		intact := func(key string) {
			t.Helper()
			resp, err := get(key)
			if err != nil || len(resp.GetMessages()) != 1 || resp.GetMessages()[0].GetParts()[0].GetText().GetText() != "hello" {
				t.Fatalf("session not intact for %s: %v, %v", key, resp, err)
			}
		}
		intact("k-a")

		// A revocation beside a broken line still revokes.
		write(keyLine("a", "acme", "k-a", true), "{not json", keyLine("b", "acme", "k-b", false))
		refused("revocation beside a broken line", "k-a")
		intact("k-b")

		// A revocation with a typo (an unknown field) still revokes.
		write(keyLine("a", "acme", "k-a", false), keyLine("b", "acme", "k-b", false))
		accepted("key back", "k-a")
		write(`{"id":"a","tenant":"acme","sha256":"`+auth.Digest("k-a")+`","revokd":true}`, keyLine("b", "acme", "k-b", false))
		refused("revocation with a typo", "k-a")
		intact("k-b")

		// A digest listed twice is refused rather than moved to another
		// tenant.
		write(keyLine("b", "acme", "k-b", false), keyLine("b2", "globex", "k-b", false), keyLine("c", "acme", "k-c", false))
		refused("duplicate digest", "k-b")
		intact("k-c")

		// A deleted file leaves no key usable.
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		refused("deleted file", "k-c")

		// Back: the session is as it was.
		write(keyLine("c", "acme", "k-c", false))
		accepted("restored file", "k-c")
		intact("k-c")
	})
}
