package gateway

import (
	"encoding/json"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// door is one provider shape (openai_chat.go, openai_responses.go,
// anthropic.go): the translation between its wire format and the
// domain's chat.Message, at the edge, so that nothing after admit knows
// whose shape a request came in. The request path (exchange.go) calls it
// in this order: parse (admit), build (prepare, again for each round of
// the expand loop), answer or stream (relay, or roundTrip for the expand
// loop), and the expand loop's helpers.
//
// The contract:
//   - parse reads a request body's conversation and changes nothing in
//     the body. Bad input is a *chat.InvalidError naming the field (the
//     client gets 400), never a panic. What the shape carries that the
//     domain does not (images' data, thinking blocks, reasoning items,
//     unknown fields) rides in the messages' metadata (raw.go), and the
//     client's own JSON of each message in the conversation (c.raws for
//     Chat Completions, c.runs for Responses, c.blocks for Anthropic), so
//     build can send it back byte for byte. A request whose conversation the provider holds
//     (Responses' previous_response_id) sets c.passthrough: it is
//     forwarded unchanged and not managed.
//   - build splices view (the prepared view, or the view and the expand
//     loop's turns) into the request body in place of the conversation's
//     member alone (requestBody.splice; encode writes the body once):
//     every other field goes upstream as the client sent it (a door may
//     ask for what it needs to record, as Chat Completions asks for the
//     stream's usage chunk, and its stream drops it again). A message the
//     client sent in this request that was not compacted goes as the
//     client sent it. build may be called again on the same body.
//   - answer reads a non-streamed answer and never fails: a usage the
//     provider did not report has ok false, a reply it cannot read is
//     nil. stream returns a new streamer for one streamed answer.
//   - name is stored (the sessions' SessionLabel value, the raw metadata
//     keys, the history chains' scope): it never changes.
//   - A door may also rewrite the answer the client gets (answerRewriter,
//     callids.go).
//
// Doors hold no per-request state; one value serves every request (the
// parse memo, memo.go, is safe for concurrent use).
type door interface {
	// name tags the sessions and raw metadata of the door.
	name() string
	// shape is whose error format the door answers in (errors.go).
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
	// stream follows a streamed answer; seed names it among the answers
	// of every request (exchange.newStream): what the door makes up for
	// it (callids.go) derives from seed, so a retry makes up the same.
	stream(c *conversation, seed string) streamer
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
	// on to the client and whether it is the stream's last: just before it
	// is written, the answer's recording starts (relay.go).
	event(name string, data []byte) (forward, last bool)
	// result is the usage and reply seen; ok only after the last event.
	result() (usage, []chat.Message, bool)
	// partial is what a stream that ended before its last event carried
	// (cutusage.go): the usage it reported so far (ok false: none, or
	// not all of it) and the text of the answer that came (texts,
	// thinking, tool arguments; every choice's text).
	partial() (usage, string)
}

// conversation is a request's conversation in the domain's terms, as a
// door parsed it.
type conversation struct {
	// noHeld: a longer session held the request's new chains when the
	// match took the held row (lastserved.go): match by the index.
	noHeld bool
	model  string
	stream bool
	system string
	tools  []chat.Tool
	msgs   []chat.Message
	// digests are msgs' digests (digestOf), in order.
	digests [][32]byte
	// ids are msgs' identities (identityOf) and chains the history chains
	// they end (historyChains), in order.
	ids    [][32]byte
	chains []string
	// details are msgs' details (detailOf), computed when a log is first
	// matched.
	details [][16]byte
	// sent are the stored messages' places in msgs, by log position, as
	// this request found them (sentOf, assent.go).
	sent sentPlaces
	// clientMarks: the client placed prompt-cache marks of its own; marked
	// are the digests of the messages it marked.
	clientMarks bool
	marked      map[[32]byte]json.RawMessage
	// wantsUsage: the client asked for the stream's usage chunk (OpenAI).
	wantsUsage bool
	// raws are the client's own JSON of msgs, by digest, for doors that
	// send a message the client sent back as it came; lead is how many
	// elements of the client's array the system prompt took (sent back as
	// they came).
	raws map[[32]byte]json.RawMessage
	lead int
	// runs are the client's own items of msgs, by digest (Responses: a
	// message is a run of items); blocks, its content blocks (Anthropic).
	runs   map[[32]byte][]json.RawMessage
	blocks map[[32]byte][]json.RawMessage
	// pins are the texts that pin a message appended with them (pin.go).
	pins []string
	// passthrough, when set, says why the request is forwarded unchanged
	// (the provider holds the conversation, not the client).
	passthrough string
}
