package chat

import (
	"encoding/json"
	"fmt"
)

// ValidateTools checks tool definitions: names unique, parameters a JSON
// object when given. field is the request path of the list (e.g. "tools").
func ValidateTools(field string, tools []Tool) error {
	var violations []Violation
	seen := make(map[string]int, len(tools))
	for i, t := range tools {
		f := fmt.Sprintf("%s[%d]", field, i)
		if t.Name == "" {
			violations = append(violations, Violation{f + ".name", "is required"})
		} else if j, dup := seen[t.Name]; dup {
			violations = append(violations, Violation{f + ".name", fmt.Sprintf("duplicates %s[%d].name %q", field, j, t.Name)})
		} else {
			seen[t.Name] = i
		}
		if t.Parameters != "" {
			var obj map[string]any
			if err := json.Unmarshal([]byte(t.Parameters), &obj); err != nil || obj == nil {
				violations = append(violations, Violation{f + ".parameters_json", "must be a JSON object (a JSON Schema)"})
			}
		}
	}
	if len(violations) > 0 {
		return &InvalidError{Violations: violations}
	}
	return nil
}

// ValidateMessages checks the structure of messages: the caps on parts and
// tool calls (CheckStructure), each part matches its role (tool results only in tool messages, tool calls only in assistant
// messages), and a tool message carries exactly one tool result. Pairing of
// calls and results across messages is checked by ValidatePairing.
func ValidateMessages(field string, msgs []Message) error {
	if err := CheckStructure(field, msgs); err != nil {
		return err
	}
	var violations []Violation
	add := func(f, format string, args ...any) {
		violations = append(violations, Violation{f, fmt.Sprintf(format, args...)})
	}
	for i, m := range msgs {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			add(f+".role", "must be one of system, user, assistant, tool")
			continue
		}
		if len(m.Parts) == 0 {
			add(f+".parts", "must have at least one part")
			continue
		}
		results := 0
		for j, p := range m.Parts {
			pf := fmt.Sprintf("%s.parts[%d]", f, j)
			switch p.Type {
			case PartToolCall:
				if m.Role != RoleAssistant {
					add(pf+".tool_call", "tool calls are only allowed in assistant messages")
				}
			case PartToolResult:
				results++
				if m.Role != RoleTool {
					add(pf+".tool_result", "tool results are only allowed in tool messages")
				}
			case PartText, PartImage:
			default:
				add(pf, "unknown part type %q", p.Type)
			}
		}
		if m.Role == RoleTool && results != 1 {
			add(f+".parts", "a tool message must carry exactly one tool_result part (it has %d)", results)
		}
	}
	if len(violations) > 0 {
		return &InvalidError{Violations: violations}
	}
	return nil
}
