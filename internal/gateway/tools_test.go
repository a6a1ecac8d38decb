package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

// Codex CLI sends a "namespace" tool whose nested tools are most of its
// definition: all of it is what the model reads, so all of it is counted
// (only its name and description were: ~3k tokens of a small window).
func TestToolsOfOtherTypesAreCountedWhole(t *testing.T) {
	nested := `{"type":"function","name":"spawn_agent","description":"` + strings.Repeat("Spawn a sub-agent. ", 50) + `","parameters":{"type":"object"}}`
	raw := json.RawMessage(`[{"type":"function","name":"shell","description":"run","parameters":{"type":"object"}},` +
		`{"type":"namespace","name":"multi_agent_v1","description":"agents","tools":[` + nested + `]},` +
		`{"type":"custom","name":"apply_patch","description":"patch","format":{"type":"grammar","definition":"start: x"}},` +
		`{"type":"web_search"}]`)
	tools, err := openAITools(nil, raw, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 4 {
		t.Fatalf("%d tools", len(tools))
	}
	if tools[0].Name != "shell" || tools[0].Description != "run" {
		t.Errorf("function tool: %+v", tools[0])
	}
	if tools[1].Name != "multi_agent_v1" || !strings.Contains(tools[1].Description, "Spawn a sub-agent.") {
		t.Errorf("namespace tool not counted whole: %+v", tools[1])
	}
	if tools[2].Name != "apply_patch" || !strings.Contains(tools[2].Description, "start: x") {
		t.Errorf("custom tool not counted whole: %+v", tools[2])
	}
	if tools[3].Name != "web_search_3" || !strings.Contains(tools[3].Description, "web_search") {
		t.Errorf("built-in tool: %+v", tools[3])
	}
}
