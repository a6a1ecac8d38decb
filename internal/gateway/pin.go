package gateway

import (
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// PinMarker pins the message whose text holds it: compaction never prunes,
// summarizes or drops it (an agent's instructions file, a plan). It is an
// HTML comment, so it stays out of rendered Markdown.
const PinMarker = "<!-- contextd:pin -->"

// Bounds of the X-Contextd-Pin header.
const (
	maxPins      = 8
	maxPinLength = 256
)

// pinMarkers is PinMarker plus the texts of X-Contextd-Pin (each value a
// text a message must hold to be pinned, e.g. "# Plan"), checked.
func pinMarkers(values []string) ([]string, error) {
	out := []string{PinMarker}
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "":
				continue
			case len(p) > maxPinLength:
				return nil, chat.Invalid(HeaderPin, "each text is at most %d bytes", maxPinLength)
			}
			out = append(out, p)
		}
	}
	if len(out) > maxPins+1 {
		return nil, chat.Invalid(HeaderPin, "at most %d texts", maxPins)
	}
	return out, nil
}

// pin marks the messages about to be appended whose text holds a marker
// (user and system messages, and assistant messages without tool calls).
// A message is pinned when it is appended; pinning does not change its
// digest, so the history still matches.
func pin(msgs []chat.Message, markers []string) {
	for i := range msgs {
		m := &msgs[i]
		if m.Role == chat.RoleTool || hasToolCall(m) {
			// A tool call and its results go together: pinning one
			// half could keep it without the other.
			continue
		}
		for _, p := range m.Parts {
			if p.Type == chat.PartText && p.Text != "" && containsAny(p.Text, markers) {
				m.Pinned = true
				break
			}
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func hasToolCall(m *chat.Message) bool {
	for _, p := range m.Parts {
		if p.Type == chat.PartToolCall {
			return true
		}
	}
	return false
}
