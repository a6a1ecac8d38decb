package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/engine"
)

// TestResponsesRunsFromMemo: a Responses request parsed from the memo (its
// runs found by their items' kinds alone, nothing decoded) is the same
// conversation, sent upstream as the same body, as one parsed cold.
func TestResponsesRunsFromMemo(t *testing.T) {
	raw := fixture(t, "requests/responses.json")
	d := openAIResponses{newMemo(memoBytes)}
	var bodies [][]byte
	var convs []*conversation
	for range 3 { // without the memo's runs, filling it, from it
		b, err := scanBody(raw)
		if err != nil {
			t.Fatal(err)
		}
		door := d
		if len(convs) == 0 {
			door = openAIResponses{}
		}
		c, err := door.parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := door.build(b, c, c.msgs, engine.CacheHints{}); err != nil {
			t.Fatal(err)
		}
		convs, bodies = append(convs, c), append(bodies, b.encode())
	}
	for i := 1; i < len(convs); i++ {
		if !reflect.DeepEqual(convs[i].msgs, convs[0].msgs) || !reflect.DeepEqual(convs[i].ids, convs[0].ids) ||
			!reflect.DeepEqual(convs[i].digests, convs[0].digests) || convs[i].system != convs[0].system || convs[i].lead != convs[0].lead {
			t.Errorf("parse %d differs from the cold parse", i)
		}
		if string(bodies[i]) != string(bodies[0]) {
			t.Errorf("parse %d built another body:\n%s\nwant\n%s", i, bodies[i], bodies[0])
		}
	}
}

// TestResponsesItemKinds: an item's type, role and call_id are read as
// encoding/json reads them (names in any case, the last one counting, null
// as empty), and an item it would refuse is refused.
func TestResponsesItemKinds(t *testing.T) {
	for _, in := range []string{
		`{"type":"message","role":"user","content":"hi"}`, `{"Type":"function_call","CALL_ID":"c1","arguments":"{}"}`,
		`{"role":"assistant","role":"user"}`, `{"type":null,"role":"x","content":[{"type":"nested"}]}`, `{"type":"a\u0062c"}`,
		`{}`, `{"type":5}`, `[]`, `"item"`, `{"call_id":{"x":1}}`,
	} {
		var it rItem
		wantOK := json.Unmarshal([]byte(in), &it) == nil
		k, ok := rKindOf([]byte(in))
		if ok != wantOK || ok && (k.typ != it.Type || k.role != it.Role || k.callID != it.CallID) {
			t.Errorf("%s: read %+v (ok %v), encoding/json %+v (ok %v)", in, k, ok, it, wantOK)
		}
	}
}
