package gateway_test

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestStreamedCallIDsRetried: a streamed answer whose tool call came
// without an id gets the gateway's id; the same request again (a retry
// whose answer was lost) gets the same id, so the client's next turn
// extends the session whichever answer it kept. Before, a streamed
// answer's ids were random per answer, and the retried answer's id was one
// the session had never recorded.
// A JSON answer's ids too (from the request and its message).
func TestStreamedCallIDsRetried(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "json"}[stream], func(t *testing.T) {
			s := start(t, nil)
			a := newChatAgent(s, stream).(*chatAgent)
			call := gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{Name: "ls", Arguments: `{"path":"src"}`}}}
			s.fake.Script(call, call, gatewaytest.Reply{Text: "src holds main.go"})
			first := a.ask(t)
			a.params.Messages = a.params.Messages[:len(a.params.Messages)-1] // the answer lost: the same request again
			again := a.ask(t)
			if !strings.HasPrefix(first.callID, "call_gw_") || again.callID != first.callID {
				t.Fatalf("the first answer's call id %q, the retried answer's %q", first.callID, again.callID)
			}
			a.result(again.callID, "main.go")
			if next := a.ask(t); next.header.Get("X-Contextd-History") != "extended" || next.text != "src holds main.go" {
				t.Fatalf("the next turn: history %q, text %q", next.header.Get("X-Contextd-History"), next.text)
			}
		})
	}
}
