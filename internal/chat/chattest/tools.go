// Package chattest holds chat values that tests and benchmarks of several
// packages share.
package chattest

import (
	"fmt"
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// AgentTools is a coding agent's tools: 30 of about 2 KB of JSON each
// (62 KB in all).
func AgentTools() []chat.Tool {
	var tools []chat.Tool
	for i := range 30 {
		schema := `{"type":"object","properties":{` + strings.Repeat(`"field_name_here":{"type":"string","description":"what this field of the tool means to the model, in a sentence or two."},`, 10) + `"x":{"type":"number"}},"required":["x"]}`
		tools = append(tools, chat.Tool{Name: fmt.Sprint("tool", i), Description: strings.Repeat("Describes the tool for the model. ", 20), Parameters: schema})
	}
	return tools
}
