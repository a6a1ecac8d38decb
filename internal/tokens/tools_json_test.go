package tokens

import (
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestToolsJSON: a framing with ToolsJSON counts each tool definition as
// its compact JSON with sorted keys (how Anthropic reads tools), not by
// OpenAI's function rule, and charges those bytes against the limits.
func TestToolsJSON(t *testing.T) {
	enc, err := LoadEncoding("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	tools := []chat.Tool{{Name: "get_weather", Description: "Get the current weather in a given location",
		Parameters: `{"type": "object", "properties": {"location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"}}, "required": ["location"]}`}}
	const def = `{"description":"Get the current weather in a given location","input_schema":{"properties":{"location":{"description":"The city and state, e.g. San Francisco, CA","type":"string"}},"required":["location"],"type":"object"},"name":"get_weather"}`
	fr := DefaultFraming
	fr.ToolsJSON = true
	n, per := CountTools(enc, fr, "", tools)
	if want := int64(enc.Count(def)); n != want || len(per) != 1 || per[0].Tokens != want {
		t.Errorf("tools as JSON: %d (%v), want %d", n, per, want)
	}
	rule, _ := CountTools(enc, DefaultFraming, "", tools)
	if rule == n {
		t.Errorf("OpenAI's rule counts %d too: the test does not tell them apart", rule)
	}
	if b := ToolBytes(fr, tools); b != len(def) {
		t.Errorf("ToolBytes = %d, want %d", b, len(def))
	}
}
