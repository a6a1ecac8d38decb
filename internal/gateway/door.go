package gateway

import (
	"encoding/json"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// door is one provider shape: how to read its requests and answers, and
// how to write the prepared view in it.
type door interface {
	// name tags the sessions and raw metadata of the door.
	name() string
	shape() wireShape
	// upstream is the URL requests are forwarded to.
	upstream(cfg *Config) string
	// parse reads the conversation of a request body (InvalidError on bad
	// input).
	parse(b *requestBody) (*conversation, error)
	// build writes the prepared view into the request body to forward
	// (the conversation's member spliced from the client's own bytes
	// where a message goes as it came; requestBody.encode writes it).
	build(b *requestBody, c *conversation, view []chat.Message, hints engine.CacheHints) error
	// answer reads a non-streamed answer: the usage and the reply.
	answer(body []byte) (usage, []chat.Message)
	// stream follows a streamed answer.
	stream(c *conversation) streamer
	// toolJSON writes a tool definition contextd adds (expandloop.go);
	// toolChoiceNone is the tool_choice that allows no tool call.
	toolJSON(t chat.Tool) json.RawMessage
	toolChoiceNone() json.RawMessage
	// expandSeen looks for contextd_expand calls in an answer or one of
	// its events, in every choice (first: the first choice calls it;
	// other: another does); ok is false when it cannot read the data.
	expandSeen(data []byte) (first, other, ok bool)
	// echo puts the client's tools and tool_choice back where the
	// provider echoes the request's in an answer or event (ok false when
	// it cannot read the data).
	echo(data []byte, tools, choice json.RawMessage) ([]byte, bool)
}

// streamer follows an SSE answer event by event.
type streamer interface {
	// event sees one event (its name and data) and says whether to pass it
	// on to the client and whether it is the stream's last: once it is
	// written, the answer is recorded.
	event(name string, data []byte) (forward, last bool)
	// result is the usage and reply seen; ok only after the last event.
	result() (usage, []chat.Message, bool)
}
