package app

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/chat"
)

func emptyParts(n int) []*contextdv1.Part {
	parts := make([]*contextdv1.Part, n)
	for i := range parts {
		parts[i] = text("")
	}
	return parts
}

// callsMsg is an assistant message making n tool calls, ids from first.
func callsMsg(first, n int) *contextdv1.Message {
	m := &contextdv1.Message{Role: contextdv1.Role_ROLE_ASSISTANT}
	for i := range n {
		m.Parts = append(m.Parts, &contextdv1.Part{Kind: &contextdv1.Part_ToolCall{ToolCall: &contextdv1.ToolCallPart{
			Id: fmt.Sprint("call_", first+i), Name: "read", ArgumentsJson: `{"path":"a.go"}`}}})
	}
	return m
}

// TestHostileStructure: a request's structure is capped and charged
// (issue 24: a million empty parts counted as 0 bytes and took 400 MB; 10
// messages × 4,000 tool calls became 40,011 rows and held the SQLite writer
// for 5 s). Over the caps: InvalidArgument naming the field. Under them but
// over CONTEXTD_MAX_COUNT_BYTES by its fixed costs: ResourceExhausted. An
// append at the caps (4 × 256 tool calls, every one then interrupted)
// costs, per byte it is charged, at most 3× what an ordinary append of text
// does. The session is intact afterwards.
func TestHostileStructure(t *testing.T) {
	const limit = 2 << 20
	onBothStores(t, map[string]string{"CONTEXTD_MAX_COUNT_BYTES": fmt.Sprint(limit)}, func(t *testing.T, client contextdv1.ContextServiceClient) {
		ctx := t.Context()
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "s", Messages: []*contextdv1.Message{user("the task")}}); err != nil {
			t.Fatal(err)
		}
		manyMessages := func(n int) []*contextdv1.Message {
			msgs := make([]*contextdv1.Message, n)
			for i := range msgs {
				msgs[i] = &contextdv1.Message{Role: contextdv1.Role_ROLE_USER, Parts: emptyParts(1)}
			}
			return msgs
		}
		callers := func(n, calls int) []*contextdv1.Message {
			var msgs []*contextdv1.Message
			for i := range n {
				msgs = append(msgs, callsMsg(i*calls, calls))
			}
			return msgs
		}
		for _, c := range []struct {
			name  string
			call  func() error
			code  codes.Code
			field string
		}{
			{"a million empty parts", func() error {
				_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Model: "gpt-4o",
					Messages: []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: emptyParts(1_000_000)}}})
				return err
			}, codes.InvalidArgument, "messages[0].parts"},
			{"200,000 one-part messages", func() error {
				_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Model: "gpt-4o", Messages: manyMessages(200_000)})
				return err
			}, codes.InvalidArgument, "messages"},
			{"20,000 empty messages, charged past the limit", func() error {
				_, err := client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_Inline{
					Inline: &contextdv1.InlineContext{Model: "gpt-4o", Messages: manyMessages(20_000)}}})
				return err
			}, codes.ResourceExhausted, "CONTEXTD_MAX_COUNT_BYTES allows 2097152 per request"},
			{"10 × 4,000 tool calls appended", func() error {
				_, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "s", Messages: callers(10, 4_000)})
				return err
			}, codes.InvalidArgument, "messages[0].parts"},
			{"5 × 256 tool calls prepared", func() error {
				_, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "s", Messages: callers(5, 256)})
				return err
			}, codes.InvalidArgument, "messages"},
			{"45 × 250 tool calls counted", func() error {
				_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Model: "gpt-4o", Messages: callers(45, 250)})
				return err
			}, codes.InvalidArgument, "messages"},
		} {
			err := c.call()
			if status.Code(err) != c.code || !strings.Contains(status.Convert(err).Message(), c.field+":") {
				t.Errorf("%s: %v; want %v naming %q", c.name, err, c.code, c.field)
			}
		}
		got, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "s"})
		if err != nil || got.GetSession().GetVersion() != 2 || got.GetSession().GetLogCount() != 1 {
			t.Fatalf("the session after refused calls: %v, %v", got, err)
		}

		// At the caps (an append stores at most 1,024 tool calls): stored, at a cost per charged byte
		// within 3× of an ordinary append of text.
		for i := range 3 { // one a run: 1.4 MB of words is over half the view bound in tokens
			if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: fmt.Sprint("plain", i), Model: "gpt-4o"}); err != nil {
				t.Fatal(err)
			}
		}
		const atCapsMessages = chat.MaxToolCallsPerAppend / chat.MaxToolCallsPerMessage
		atCaps := callers(atCapsMessages, chat.MaxToolCallsPerMessage)
		atCaps = append([]*contextdv1.Message{user("go")}, atCaps...)
		charge := 0
		for _, m := range atCaps {
			charge += 256 + 32*len(m.GetParts()) // engine.messageCost, partCost
			for _, p := range m.GetParts() {
				if c := p.GetToolCall(); c != nil {
					charge += 1024 + len(c.GetId()) + len(c.GetName()) + len(c.GetArgumentsJson()) // toolCallCost
				}
			}
		}
		var plain []*contextdv1.Message
		n := len(atCaps)
		for range n {
			plain = append(plain, user(strings.Repeat("word ", (charge-n*288)/n/5)))
		}
		run := 0
		hostileCost, err := allocated(t, func() error {
			_, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "s", Messages: atCaps})
			run++
			atCaps = callers(atCapsMessages, chat.MaxToolCallsPerMessage) // fresh ids for the next run
			for _, m := range atCaps {
				for _, p := range m.GetParts() {
					p.GetToolCall().Id += fmt.Sprint("_", run)
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		plainRun := 0
		plainCost, err := allocated(t, func() error {
			_, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: fmt.Sprint("plain", plainRun), Messages: plain})
			plainRun++
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		ratio := float64(hostileCost) / float64(plainCost)
		t.Logf("an append of %d × %d tool calls (charged %d bytes) allocates %d bytes, %.2f× an append of %d bytes of text (%d)",
			atCapsMessages, chat.MaxToolCallsPerMessage, charge, hostileCost, ratio, charge, plainCost)
		if ratio > 3 {
			t.Errorf("an append at the caps costs %.1f× an ordinary append charged the same; want at most 3×", ratio)
		}
		msgs, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "s", PageSize: 1})
		if err != nil || msgs.GetMessages()[0].GetParts()[0].GetText().GetText() != "the task" {
			t.Errorf("the session's first message after: %v, %v", msgs, err)
		}
	})
}
