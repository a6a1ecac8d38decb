package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
)

// slowRewriter is the Chat Completions door whose answer rewriting takes
// until the keepalive has begun the stream (wait): the ticker fires while
// relayHeld prepares the answer.
type slowRewriter struct {
	openAIChat
	wait func()
}

func (d slowRewriter) clientAnswer(body []byte, seed string) []byte {
	d.wait()
	return d.openAIChat.clientAnswer(body, seed)
}

// TestRelayHeldNeverRecordsWhatTheStreamRefused: the expand loop's final
// round held as JSON for a streamed request goes out, and its reply is
// recorded, only when the keepalive has not begun the stream; once it has,
// the client gets an error event and nothing is recorded — also when the
// ticker begins the stream while relayHeld prepares the answer. Before,
// relayHeld checked the stream and wrote its headers in two steps: the
// ticker began the stream in between, the JSON answer became an error
// event, and its reply was recorded all the same. Run with -race.
func TestRelayHeldNeverRecordsWhatTheStreamRefused(t *testing.T) {
	body := `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`
	for _, tc := range []struct {
		name    string
		every   time.Duration
		racing  bool // the ticker begins the stream while the answer is prepared
		answers bool
	}{
		{name: "before the stream", every: time.Hour, answers: true},
		{name: "stream begun meanwhile", every: time.Millisecond, racing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			w, stop := startKeepalive(rec, shapeOpenAI, tc.every)
			d := slowRewriter{openAIChat: openAIChat{newMemo(1 << 20)}, wait: func() {}}
			if tc.racing {
				d.wait = func() {
					for !streamStarted(w) {
						time.Sleep(100 * time.Microsecond)
					}
				}
			}
			x := &exchange{w: w, d: d, shape: shapeOpenAI}
			a := answer{held: &round{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(body),
				reply: []chat.Message{{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "done"}}}}}}
			out := x.relay(a)
			stop()
			got := rec.Body.String()
			answered := strings.Contains(got, `"content":"done"`)
			if answered != tc.answers || (out.reply != nil) != answered {
				t.Fatalf("the client got the answer: %v; its reply recorded: %v; want both %v\n%s", answered, out.reply != nil, tc.answers, got)
			}
			if !answered && !strings.Contains(got, "event: error") {
				t.Errorf("the client got neither the answer nor an error event:\n%s", got)
			}
		})
	}
}
