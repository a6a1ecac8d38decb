package store_test

import (
	"encoding/json"
	"testing"

	"github.com/contextd/contextd/internal/chat/chattest"
	"github.com/contextd/contextd/internal/store"
)

// BenchmarkDecodeTools reads a session row's tools (agentTools, 62 KB) as
// each read of the row does.
func BenchmarkDecodeTools(b *testing.B) {
	tools := chattest.AgentTools()
	text, _ := json.Marshal(tools)
	var s store.Session
	for b.Loop() {
		if err := (store.SessionJSON{Tools: string(text), Policy: "{}", Labels: "{}"}).DecodeInto(&s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeTools writes them as each write of the row does.
func BenchmarkEncodeTools(b *testing.B) {
	tools := chattest.AgentTools()
	s := store.Session{Tools: tools}
	for b.Loop() {
		if _, err := store.EncodeSession(&s); err != nil {
			b.Fatal(err)
		}
	}
}
