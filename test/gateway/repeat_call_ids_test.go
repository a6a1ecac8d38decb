package gateway_test

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestRepeatedCallGetsNewID: a model that makes the same call again in a
// later turn (the same name and arguments, without an id both times, as
// some OpenAI-compatible servers send them) gets a new gateway id for it,
// in a JSON answer as in a stream, and the conversation goes on. Before, a
// JSON answer's ids were a digest of the answer's message alone: the second
// call got the first's id, which the session had already recorded, and the
// turn that answered it was refused ("tool call id ... is already used in
// this session").
func TestRepeatedCallGetsNewID(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "json"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			s := start(t, nil)
			a := newChatAgent(s, stream).(*chatAgent)
			call := gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{Name: "ls", Arguments: `{"path":"src"}`}}}
			s.fake.Script(call, gatewaytest.Reply{Text: "src holds main.go"}, call, gatewaytest.Reply{Text: "still main.go"})
			first := a.ask(t)
			a.result(first.callID, "main.go")
			a.ask(t)
			a.user("Look again.")
			second := a.ask(t)
			if !strings.HasPrefix(second.callID, "call_gw_") || second.callID == first.callID {
				t.Fatalf("the first call's id %q, the second's %q", first.callID, second.callID)
			}
			a.result(second.callID, "main.go")
			out, err := a.try(t)
			if err != nil {
				t.Fatalf("the turn answering the second call: %v", err)
			}
			if out.text != "still main.go" || out.header.Get("X-Contextd-History") != "extended" {
				t.Fatalf("the turn answering the second call: history %q, text %q", out.header.Get("X-Contextd-History"), out.text)
			}
		})
	}
}
