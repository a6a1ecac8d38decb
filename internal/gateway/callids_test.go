package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestStreamedCallIDs: a Chat Completions stream whose tool calls come
// without an id (two calls, the second's deltas in one chunk with the
// first's last) gets the gateway's id in each call's first delta, once,
// and the reply recorded from the stream names the same ids; an event
// with nothing to name goes as it came, and an id the provider sent is
// kept.
func TestStreamedCallIDs(t *testing.T) {
	st := openAIChat{newMemo(1 << 20)}.stream(&conversation{}, "k/1")
	rw := st.(eventRewriter)
	events := []string{
		`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"","type":"function","function":{"name":"ls","arguments":""}}]}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}},{"index":1,"type":"function","function":{"name":"cat","arguments":"{}"}}]}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"call_theirs","type":"function","function":{"name":"pwd","arguments":"{}"}}]}}]}`,
		`[DONE]`,
	}
	var client []string // the ids the client's deltas carry, in order
	for i, data := range events {
		st.event("", []byte(data))
		out := rw.clientEvent([]byte(data))
		if i == 0 || i == 4 {
			if out != nil {
				t.Errorf("event %d rewritten: %s", i, out)
			}
			continue
		}
		if out == nil {
			out = []byte(data)
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						ID *string `json:"id"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(out, &chunk); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, out)
		}
		for _, tc := range chunk.Choices[0].Delta.ToolCalls {
			if tc.ID != nil && *tc.ID != "" {
				client = append(client, *tc.ID)
			}
		}
	}
	if len(client) != 3 || !strings.HasPrefix(client[0], "call_gw_") || !strings.HasPrefix(client[1], "call_gw_") || client[0] == client[1] || client[2] != "call_theirs" {
		t.Fatalf("the client's ids: %q", client)
	}
	_, reply, ok := st.result()
	if !ok || len(reply) != 1 {
		t.Fatalf("result: %v %v", ok, reply)
	}
	var recorded []string
	for _, p := range reply[0].Parts {
		if p.Type == chat.PartToolCall {
			recorded = append(recorded, p.ToolCall.ID)
		}
	}
	if strings.Join(recorded, ",") != strings.Join(client, ",") {
		t.Errorf("recorded %q, the client got %q", recorded, client)
	}
	if raw := rawOf(&reply[0], doorOpenAIChat); !bytes.Contains(raw, []byte(client[0])) {
		t.Errorf("the reply's raw JSON lacks the id: %s", raw)
	}
}
