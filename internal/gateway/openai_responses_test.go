package gateway

import "testing"

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
