package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestHostilePagesInJSON: messages of control characters, which JSON writes
// six bytes each (\u0001), read over Connect JSON. Pages are sized for that
// encoding: each page's JSON stays within CONTEXTD_MAX_RESPONSE_BYTES (or
// is one message), where a page sized by raw bytes encoded to six times the
// bound, past what the transcoder buffers (CONTEXTD_MAX_MESSAGE_BYTES), and
// the call failed. The gRPC answer is bounded the same way. On both stores.
func TestHostilePagesInJSON(t *testing.T) {
	const limit = 1 << 20
	onBothStoresEnv(t, map[string]string{"CONTEXTD_MAX_RESPONSE_BYTES": fmt.Sprint(limit), "CONTEXTD_MAX_MESSAGE_BYTES": fmt.Sprint(2 * limit)}, func(t *testing.T, env map[string]string) {
		api, client := startHTTP(t, env)
		ctx := t.Context()
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "esc", Model: "gpt-4.1"}); err != nil {
			t.Fatal(err)
		}
		const n = 8
		for i := range n { // 200 KB of \x01 each: 1.2 MB of JSON
			m := user(fmt.Sprintf("%d:", i) + strings.Repeat("\x01", 200<<10))
			if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "esc", Messages: []*contextdv1.Message{m}}); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		pages := 0
		for token := ""; ; pages++ {
			body, _ := json.Marshal(map[string]any{"sessionId": "esc", "pageSize": 100, "pageToken": token})
			code, _, out := api.post("GetMessages", string(body))
			if code != http.StatusOK {
				t.Fatalf("page %d: HTTP %d %.300s", pages, code, out)
			}
			var page struct {
				Messages []struct {
					Parts []struct {
						Text struct{ Text string } `json:"text"`
					} `json:"parts"`
				} `json:"messages"`
				NextPageToken string `json:"nextPageToken"`
			}
			if err := json.Unmarshal(out, &page); err != nil {
				t.Fatal(err)
			}
			if len(out) > limit && len(page.Messages) > 1 {
				t.Errorf("page %d: %d bytes of JSON with %d messages; the bound is %d", pages, len(out), len(page.Messages), limit)
			}
			for _, m := range page.Messages {
				prefix, _, _ := strings.Cut(m.Parts[0].Text.Text, ":")
				got = append(got, prefix)
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
		if want := "0 1 2 3 4 5 6 7"; strings.Join(got, " ") != want {
			t.Fatalf("messages %v, want every one once, in order", got)
		}
	})
}
