package gateway

import (
	"bytes"
	"encoding/json"
)

// answerRewriter is a door that changes the answer the client gets: tool
// calls that came without an id (as some OpenAI-compatible servers send
// them) get the gateway's (withCallIDs), in the client's copy as in the
// recorded reply, so the client's next turn names them and matches.
type answerRewriter interface {
	clientAnswer(body []byte) []byte
}

func (openAIChat) clientAnswer(body []byte) []byte {
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
			if withIDs := withCallIDs(msg); !bytes.Equal(withIDs, msg) {
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
