package gateway

import (
	"bytes"
	"encoding/json"
	"slices"
)

// A door sends a message the client sent in this request back as the
// client sent it, found by its digest (conversation.raws, runs, blocks).
// The digest leaves out what the domain does not model (reasoning and
// thinking items, item ids), so two messages of one request may share a
// digest and differ in those: the digest then names neither, and each goes
// as the log stored it (rawOf), never as the other.

// keepOwn files v, a message's own JSON, under its digest d in m; when m
// holds other JSON under d, d is filed as nil (ambiguous: build uses the
// stored JSON).
func keepOwn[S ~[]E, E any](m map[[32]byte]S, d [32]byte, v S, equal func(a, b S) bool) {
	if old, ok := m[d]; ok && (old == nil || !equal(old, v)) {
		m[d] = nil
		return
	}
	m[d] = v
}

func sameRaw(a, b json.RawMessage) bool { return bytes.Equal(a, b) }

func sameRaws(a, b []json.RawMessage) bool {
	return slices.EqualFunc(a, b, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) })
}
