package gateway

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestToolsMemoWarmIsCold: tools read from the memo are what reading the
// same bytes yields, at each door (the same bytes are read as another
// door reads them: Chat Completions' nested functions are not the
// Responses API's flat ones), a caller's changes to them reach no later
// request, a list that does not read answers its error every time, and
// the memo keeps at most toolsMemoBytes.
func TestToolsMemoWarmIsCold(t *testing.T) {
	var list []string
	for i := range 20 {
		list = append(list, fmt.Sprintf(`{"type":"function","name":"t%d","description":"%s","parameters":{"type":"object"},"function":{"name":"f%d","description":"nested","parameters":{"type":"object"}},"input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}`,
			i, strings.Repeat("d", 100), i))
	}
	raw := json.RawMessage("[" + strings.Join(list, ",") + "]")
	if len(raw) < toolsMemoMin {
		t.Fatalf("%d bytes: the memo would not keep them", len(raw))
	}
	for range 3 { // cold, then warm twice
		chat, err := openAITools(raw, true)
		coldChat, _ := readOpenAITools(raw, true)
		if err != nil || !reflect.DeepEqual(chat, coldChat) || chat[0].Name != "f0" {
			t.Fatalf("chat: %+v, %v; read: %+v", chat, err, coldChat)
		}
		resp, err := openAITools(raw, false)
		coldResp, _ := readOpenAITools(raw, false)
		if err != nil || !reflect.DeepEqual(resp, coldResp) || resp[0].Name != "t0" {
			t.Fatalf("responses: %+v, %v; read: %+v", resp, err, coldResp)
		}
		an, marks, err := anTools(raw)
		coldAn, coldMarks, _ := readAnTools(raw)
		if err != nil || !reflect.DeepEqual(an, coldAn) || marks != coldMarks || !marks {
			t.Fatalf("anthropic: %+v %v, %v; read: %+v %v", an, marks, err, coldAn, coldMarks)
		}
		chat[0].Name, resp[0] = "changed", resp[1] // a caller's changes
		an[0].Description = "changed"
	}
	bad := json.RawMessage("[" + strings.Repeat(`{"type":"function","name":"x"},`, 100) + `7]`)
	for range 2 {
		if _, err := openAITools(bad, true); err == nil || !strings.Contains(err.Error(), "tools[100]") {
			t.Errorf("a list that does not read: %v", err)
		}
	}
	for i := range 2 * toolsMemoBytes / len(raw) {
		other := json.RawMessage(strings.Replace(string(raw), "t0", fmt.Sprintf("u%d", i), 1))
		if _, err := openAITools(other, true); err != nil {
			t.Fatal(err)
		}
		if toolsMemo.bytes > toolsMemoBytes {
			t.Fatalf("the memo keeps %d bytes, more than %d", toolsMemo.bytes, toolsMemoBytes)
		}
	}
}
