package main

import (
	"crypto/sha256"
	"strings"
	"sync"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// sentContent remembers a digest of every message the API agents sent, by
// its key, so that the checker knows the log holds each byte for byte (the
// linearizability model sees only the keys): 32 bytes a message.
type sentContent struct {
	mu    sync.Mutex
	byKey map[string][32]byte
}

// digest is a message's role and the texts of its parts.
func digest(m *contextdv1.Message) [32]byte {
	h := sha256.New()
	h.Write([]byte(m.GetRole().String()))
	for _, p := range m.GetParts() {
		h.Write([]byte{0})
		h.Write([]byte(p.GetText().GetText()))
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func (c *sentContent) add(msgs []*contextdv1.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[string][32]byte{}
	}
	for _, m := range msgs {
		if k := keyOf(m); k != "" {
			c.byKey[k] = digest(m)
		}
	}
}

// check returns the keys of the log's API-agent messages (keys «a…») that
// differ from what was sent, and those no agent sent.
func (c *sentContent) check(log []*contextdv1.Message) (differ, unsent []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range log {
		k := keyOf(m)
		if !strings.HasPrefix(k, "«a") {
			continue
		}
		want, ok := c.byKey[k]
		switch {
		case !ok:
			unsent = append(unsent, k)
		case digest(m) != want:
			differ = append(differ, k)
		}
	}
	return differ, unsent
}
