package gateway

import (
	"crypto/sha256"
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// detailOf is what identityOf leaves out of a tool result: its content.
// The identity names a result by the call it answers, which tells two
// conversations apart only while call ids are unique; a provider that
// reuses ids (call_0, a local model's fixed ids, the gateway's own ids for
// a reply of the same bytes) gives two conversations that read different
// files the same identities. A log is matched only where the details agree
// too (detailsAgree), so such conversations never share a session.
//
// A result the client has cleared (only scaffolding left, such as Qwen
// Code's "[Old tool result content cleared]") or emptied says nothing and
// agrees with any: the zero detail. Other messages have the zero detail.
func detailOf(m *chat.Message) [16]byte {
	if m.Role != chat.RoleTool {
		return [16]byte{}
	}
	h := sha256.New()
	said := false
	for _, p := range m.Parts {
		if p.Type != chat.PartToolResult {
			continue
		}
		t := strings.TrimSpace(chat.StripScaffolding(p.ToolResult.Content))
		if t == "" {
			return [16]byte{}
		}
		said = true
		h.Write([]byte(t))
		h.Write([]byte{0})
	}
	var d [16]byte
	if said {
		copy(d[:], h.Sum(nil))
	}
	return d
}

// detailsAgree: two details are of the same message, or one of them says
// nothing.
func detailsAgree(a, b [16]byte) bool {
	return a == b || a == [16]byte{} || b == [16]byte{}
}

// detailsOf is msgs' details, in order.
func detailsOf(msgs []chat.Message) [][16]byte {
	out := make([][16]byte, len(msgs))
	for i := range msgs {
		out[i] = detailOf(&msgs[i])
	}
	return out
}
