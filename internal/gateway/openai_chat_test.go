package gateway

import "testing"

// TestOpenAIChatUsage: Chat Completions' prompt_tokens includes
// prompt_tokens_details.cached_tokens; the door reports the uncached rest
// and the cache reads, in a JSON answer and in the stream's usage chunk.
// Before the fix it reported all of prompt_tokens as uncached, and the
// cached tokens were counted twice.
func TestOpenAIChatUsage(t *testing.T) {
	d := openAIChat{}
	u, reply := d.answer(fixture(t, "usage/chat_answer.json"))
	checkBilled(t, "answer", u, 19722-18944, 18944, 0, 41, 19722)
	if len(reply) != 1 {
		t.Errorf("answer: reply %+v, want one message", reply)
	}
	u, _ = d.answer(fixture(t, "usage/chat_answer_nocache.json"))
	checkBilled(t, "answer without caching", u, 812, 0, 0, 3, 812)
	for _, wants := range []bool{true, false} {
		u := streamFixture(t, d.stream(&conversation{wantsUsage: wants}, ""), "usage/chat_stream.sse")
		checkBilled(t, "stream", u, 19722-18944, 18944, 0, 7, 19722)
	}
	// A broken upstream's cached figure above the prompt is capped: the
	// parts still add up to what it counted.
	checkBilled(t, "cached above prompt", openAIUsage(100, 150, 1), 0, 100, 0, 1, 100)
}

// TestOpenAIChatRoundTrip: a Chat Completions request with an image, a
// tool call and unknown fields comes back as the client sent it.
func TestOpenAIChatRoundTrip(t *testing.T) {
	roundTrip(t, openAIChat{}, "requests/chat.json", "messages")
}
