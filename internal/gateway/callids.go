package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// Tool calls that come without an id (as some OpenAI-compatible servers
// send them) get the gateway's, so their results can name them: in the
// recorded reply and in the client's copy alike, so the client's next
// turn names them and matches the log. A JSON answer gets them from
// withCallIDs (answerRewriter); a streamed one at each call's first delta
// (eventRewriter), the id then carried by the event the client gets.

// answerRewriter is a door that changes the answer the client gets: tool
// calls that came without an id get the gateway's (withCallIDs, from seed:
// exchange.answerSeed), in the client's copy as in the recorded reply.
type answerRewriter interface {
	clientAnswer(body []byte, seed string) []byte
}

// eventRewriter is a streamer that changes the event it just saw for the
// client: nil when the event goes as it came.
type eventRewriter interface {
	clientEvent(data []byte) []byte
}

func (openAIChat) clientAnswer(body []byte, seed string) []byte {
	if !bytes.Contains(body, []byte(`"tool_calls"`)) {
		return body
	}
	var resp map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if json.Unmarshal(body, &resp) != nil || json.Unmarshal(resp["choices"], &choices) != nil {
		return body
	}
	changed := false
	for _, ch := range choices {
		if msg, ok := ch["message"]; ok {
			if withIDs := withCallIDs(msg, seed); !bytes.Equal(withIDs, msg) {
				ch["message"], changed = withIDs, true
			}
		}
	}
	if !changed {
		return body
	}
	resp["choices"] = mustJSON(choices)
	return mustJSON(resp)
}

// namedCall is a tool call delta of a streamed Chat Completion the gateway
// gave an id: the choice's place in the chunk's choices, the delta's in
// its tool_calls.
type namedCall struct {
	choice, delta int
	id            string
}

// nameCall makes the id of the stream's call index, first seen without
// one at delta of choice (the first choice's calls: the reply recorded).
// A stream's calls are named before its end, so not by the message's
// digest as withCallIDs names them: by a tag of the answer's seed (its
// tenant, its request's session and history, and its place among the
// exchange's answers: exchange.newStream), so the same request again (a retry whose
// answer was lost) gets the same ids, and its next turn matches whichever
// answer the client kept.
func (s *oaStream) nameCall(choice, delta, index int) string {
	if s.tag == "" {
		s.tag = callTag(s.seed, nil)
	}
	id := fmt.Sprintf("call_gw_%s_%d", s.tag, index)
	s.named = append(s.named, namedCall{choice: choice, delta: delta, id: id})
	return id
}

// clientEvent puts the ids the gateway gave into the event's deltas.
func (s *oaStream) clientEvent(data []byte) []byte {
	if len(s.named) == 0 {
		return nil
	}
	var chunk map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if json.Unmarshal(data, &chunk) != nil || json.Unmarshal(chunk["choices"], &choices) != nil {
		return nil
	}
	for _, n := range s.named {
		if n.choice >= len(choices) {
			return nil
		}
		var delta map[string]json.RawMessage
		var calls []map[string]json.RawMessage
		if json.Unmarshal(choices[n.choice]["delta"], &delta) != nil || json.Unmarshal(delta["tool_calls"], &calls) != nil || n.delta >= len(calls) {
			return nil
		}
		if calls[n.delta] == nil {
			return nil
		}
		calls[n.delta]["id"] = mustJSON(n.id)
		delta["tool_calls"] = mustJSON(calls)
		choices[n.choice]["delta"] = mustJSON(delta)
	}
	chunk["choices"] = mustJSON(choices)
	return mustJSON(chunk)
}

// answerSeed names the exchange's next upstream answer (its n-th: the
// expand loop reads several), JSON or streamed, for the ids the gateway
// gives its calls: the tenant, the request's key (its session and the
// digests of its history: requestKey) and n. So the same request again
// (a retry whose answer was lost) names its calls alike, and the same call
// made again in a later turn (another history) gets another id, which the
// session needs (a call id is used once in a session). The tenant is in
// it because a session's name is the tenant's own (X-Contextd-Session):
// two tenants' sessions of one name and history are two conversations. A
// request that has no key (forwarded unmanaged) seeds it at random.
func (x *exchange) answerSeed() string {
	x.answers++
	key := x.key
	if key == "" {
		key = randomID()
	}
	return strconv.Itoa(len(x.tenant)) + ":" + x.tenant + "/" + key + "/" + strconv.Itoa(x.answers)
}

// callTag is the tag of the ids the gateway gives an answer's calls: a
// digest of the answer's seed (answerSeed) and, for a JSON answer, of its
// message.
func callTag(seed string, msg []byte) string {
	h := sha256.New()
	h.Write([]byte("call ids:" + seed))
	if msg != nil {
		h.Write([]byte{0})
		h.Write(msg)
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// newStream follows the exchange's next streamed answer (answerSeed).
func (x *exchange) newStream() streamer { return x.d.stream(x.c, x.answerSeed()) }
