package store_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/chat/chattest"
	"github.com/contextd/contextd/internal/store"
)

// TestToolsCodecKeepsNothingShared: the session's tools codec answers from
// the texts and tools it saw lately (toolscodec.go), and what it answers
// is what encoding/json gives: a decoded list changed by its caller
// changes neither the next decode nor the text of the original tools, and
// changed tools are encoded as they are now, not as the cache saw them.
func TestToolsCodecKeepsNothingShared(t *testing.T) {
	tools := chattest.AgentTools()
	want, _ := json.Marshal(tools)
	for range 2 {
		j, err := store.EncodeSession(&store.Session{Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		if j.Tools != string(want) {
			t.Fatal("encoded tools differ from encoding/json's")
		}
	}
	decode := func() []chat.Tool {
		t.Helper()
		var s store.Session
		if err := (store.SessionJSON{Tools: string(want), Policy: "{}", Labels: "{}"}).DecodeInto(&s); err != nil {
			t.Fatal(err)
		}
		return s.Tools
	}
	a := decode()
	if !reflect.DeepEqual(a, tools) {
		t.Fatal("decoded tools differ from the encoded ones")
	}
	a[0].Description = "changed by the caller"
	a = append(a[:1], a[2:]...) // drops tool1, moving the rest within the slice
	if b := decode(); !reflect.DeepEqual(b, tools) {
		t.Fatalf("a caller's change to its decoded tools reached the next decode: tool 0 %q, %d tools", b[0].Description, len(b))
	}
	j, err := store.EncodeSession(&store.Session{Tools: a})
	if err != nil {
		t.Fatal(err)
	}
	if changed, _ := json.Marshal(a); j.Tools != string(changed) {
		t.Fatal("changed tools were encoded as the cache saw them")
	}
	if j, _ := store.EncodeSession(&store.Session{Tools: tools}); j.Tools != string(want) {
		t.Fatal("the original tools no longer encode as before")
	}
}
