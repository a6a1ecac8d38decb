package gateway

import (
	"errors"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestOpenAIResponsesUsage: Responses' input_tokens includes
// input_tokens_details.cached_tokens; the door reports the uncached rest
// and the cache reads, in a JSON answer and in response.completed. Before
// the fix the cached tokens were counted twice.
func TestOpenAIResponsesUsage(t *testing.T) {
	d := openAIResponses{}
	u, reply := d.answer(fixture(t, "usage/responses_answer.json"))
	checkBilled(t, "answer", u, 24311-23552, 23552, 0, 418, 24311)
	if len(reply) == 0 {
		t.Errorf("answer: no reply read")
	}
	checkBilled(t, "stream", streamFixture(t, d.stream(nil, ""), "usage/responses_stream.sse"), 24311-23552, 23552, 0, 418, 24311)
}

// TestOpenAIResponsesRoundTrip: a Codex request (environment context,
// reasoning with encrypted content, a function call and its output) comes
// back as the client sent it.
func TestOpenAIResponsesRoundTrip(t *testing.T) {
	roundTrip(t, openAIResponses{}, "requests/responses.json", "input")
}

// TestOpenAIResponsesInputShapes: input is an array of items or a string
// (one user message); anything else, or none, is refused naming input.
func TestOpenAIResponsesInputShapes(t *testing.T) {
	c, err := openAIResponses{}.parse(mustScan(t, `{"model":"m","input":"fix the bug"}`))
	if err != nil || len(c.msgs) != 1 || c.msgs[0].Role != chat.RoleUser || c.msgs[0].Parts[0].Text != "fix the bug" {
		t.Fatalf("a string input: %+v, %v; want one user message", c, err)
	}
	for _, body := range []string{`{"model":"m"}`, `{"model":"m","input":null}`, `{"model":"m","input":5}`, `{"model":"m","input":{"role":"user"}}`} {
		_, err := openAIResponses{}.parse(mustScan(t, body))
		var invalid *chat.InvalidError
		if !errors.As(err, &invalid) || len(invalid.Violations) != 1 || invalid.Violations[0].Field != "input" {
			t.Errorf("%s: %v; want input refused", body, err)
		}
	}
}
