// Package chat owns the domain model of a conversation: messages with ordered
// parts (text, tool calls, tool results, images), tool definitions, and the
// structural rules they must follow. It knows nothing of protobuf, storage or
// tokens.
package chat

import "time"

// Role is the author of a message.
type Role string

// Roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Kind says what a message is in the active view.
type Kind string

// Kinds.
const (
	KindNormal      Kind = "normal"
	KindSummary     Kind = "summary"
	KindPlaceholder Kind = "placeholder"
)

// PartType names the kind of content of a part.
type PartType string

// Part types.
const (
	PartText       PartType = "text"
	PartToolCall   PartType = "tool_call"
	PartToolResult PartType = "tool_result"
	PartImage      PartType = "image"
)

// Message is one message of a conversation.
type Message struct {
	ID       string `json:"id,omitempty"`
	Position int64  `json:"position,omitempty"`
	Role     Role   `json:"role"`
	Parts    []Part `json:"parts"`
	Name     string `json:"name,omitempty"`
	Pinned   bool   `json:"pinned,omitempty"`
	Kind     Kind   `json:"kind,omitempty"`
	Tokens   int64  `json:"tokens,omitempty"`
	// CountedFor is what Tokens was counted for (a key of the encoding and
	// the chat framing); empty when unknown. Stored, never sent to clients.
	CountedFor string            `json:"-"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	CreatedAt  time.Time         `json:"created_at,omitzero"`
	// Replaces lists the ids of the messages a summary or placeholder stands
	// in for (ExpandMessage returns them).
	Replaces []string `json:"replaces,omitempty"`
}

// Part is one piece of a message's content; exactly one field besides Type
// is set, the one Type names.
type Part struct {
	Type       PartType    `json:"type"`
	Text       string      `json:"text,omitempty"`
	ToolCall   *ToolCall   `json:"tool_call,omitempty"`
	ToolResult *ToolResult `json:"tool_result,omitempty"`
	Image      *Image      `json:"image,omitempty"`
}

// ToolCall is an assistant's call of a tool.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolResult is the result of one tool call.
type ToolResult struct {
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
	IsError    bool   `json:"is_error,omitempty"`
}

// Image is an image in a message; only its size matters for counting.
type Image struct {
	MediaType string `json:"media_type,omitempty"`
	Width     int    `json:"width,omitempty"`
	Height    int    `json:"height,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// Tool is a tool definition as given to the provider.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments, as JSON text.
	Parameters string `json:"parameters,omitempty"`
}

// Text returns the concatenated text of the message's text parts.
func (m *Message) Text() string {
	var n int
	for _, p := range m.Parts {
		n += len(p.Text)
	}
	b := make([]byte, 0, n)
	for _, p := range m.Parts {
		if p.Type == PartText {
			b = append(b, p.Text...)
		}
	}
	return string(b)
}
