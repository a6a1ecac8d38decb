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

// TestStreamedCallIDsPerTenant: a stream's invented ids derive from its
// request, so the same request again in the same tenant gets the same
// ids, and the exchange's next answer (the expand loop's) others; two
// tenants whose sessions share a name (X-Contextd-Session is the tenant's
// own) and a history are two conversations, and get different ids. Before,
// the seed was the request key alone (session name and history), and the
// two tenants' answers named their calls alike.
func TestStreamedCallIDsPerTenant(t *testing.T) {
	first := func(x *exchange) string {
		st := x.newStream().(*oaStream)
		return st.nameCall(0, 0, 0)
	}
	d := openAIChat{newMemo(1 << 20)}
	ex := func(tenant string) *exchange {
		return &exchange{d: d, c: &conversation{}, tenant: tenant, key: requestKey("main", [][32]byte{{1}})}
	}
	a, again, b := ex("tenant-a"), ex("tenant-a"), ex("tenant-b")
	idA, idAgain, idB := first(a), first(again), first(b)
	if idA != idAgain {
		t.Errorf("the same request in the same tenant: %q, then %q", idA, idAgain)
	}
	if idA == idB {
		t.Errorf("two tenants' sessions of one name and history got the same id %q", idA)
	}
	if next := first(a); next == idA {
		t.Errorf("the exchange's second answer got its first's id %q", next)
	}
}
