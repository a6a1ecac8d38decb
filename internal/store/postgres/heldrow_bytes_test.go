package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// TestHeldRowsBytesCountCallIDs: a held row's open calls count their ids'
// bytes (a client chooses them, up to a request's size each), so the held
// rows stay within heldMaxBytes whatever the ids (fails with a call
// counted as its struct alone: twenty rows of a 1 MiB id each are held).
func TestHeldRowsBytesCountCallIDs(t *testing.T) {
	var h heldRows
	id := strings.Repeat("x", 1<<20)
	for i := range 20 {
		h.put(heldKey{"t", string(rune('a' + i))}, &heldRow{calls: []store.ToolCall{{CallID: id, Position: 1}}})
	}
	held := 0
	for _, r := range h.m {
		for _, c := range r.calls {
			held += len(c.CallID)
		}
	}
	if held > heldMaxBytes || h.bytes > heldMaxBytes {
		t.Errorf("held rows hold %d bytes of call ids (counted %d); the bound is %d", held, h.bytes, heldMaxBytes)
	}
}

// TestHeldRowsShareTheToolsText: the held rows of sessions that share a
// coding agent's tools (60 KB of JSON) name the text the tools codec keeps
// by its digest instead of counting it each, so 300 of them stay held (the
// bound held about 270, then started over, forgetting everyone's), and a
// held row answers the codec's text; one session's row over a quarter of
// the bound (5 MiB of tools, more than the codec keeps) is not held and
// leaves the others'. Fails with the text counted in each row.
func TestHeldRowsShareTheToolsText(t *testing.T) {
	text := `[` + strings.Repeat(`{"name":"tool","description":"`+strings.Repeat("d", 1900)+`"},`, 30) + `{"name":"last"}]`
	digest := toolsDigest(text)
	var h heldRows
	hold := func(id, tools, digest string) {
		var tr heldTrack
		tr.lockedAt(heldKey{"t", id}, nil, true)
		tr.updated(&store.Session{Tenant: "t", ID: id, Model: "m"}, store.SessionJSON{Tools: tools, Policy: "{}", Labels: "{}"}, digest)
		h.put(heldKey{"t", id}, tr.wrote)
	}
	const n = 300
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		sawTools("t", id, digest, text, true)
		hold(id, text, digest)
	}
	hold("big", `[{"name":"big","description":"`+strings.Repeat("b", 5<<20)+`"}]`, "")
	if len(h.m) != n {
		t.Fatalf("%d rows held (%d bytes counted), want %d", len(h.m), h.bytes, n)
	}
	r := h.get(heldKey{"t", "s0"})
	if r == nil {
		t.Fatal("s0 not held")
	}
	if s, tools, ok := r.session("t", "s0"); !ok || tools != text || len(s.Tools) != 31 {
		t.Errorf("s0's held row: ok %v, %d bytes of tools, %d tools; want the codec's text", ok, len(tools), len(s.Tools))
	}
	toolsHints.mu.Lock()
	toolsHints.bySession, toolsHints.byDigest, toolsHints.bytes, toolsHints.keyBytes = nil, nil, 0, 0 // the codec started over
	toolsHints.mu.Unlock()
	if _, _, ok := r.session("t", "s0"); ok {
		t.Error("s0's held row answered once the codec forgot its tools")
	}
}
