package postgres

import (
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
