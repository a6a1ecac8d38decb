package postgres

import (
	"fmt"
	"strings"
	"testing"
)

// TestToolsHintsBoundTheirSessions: the sessions this process remembers
// the tools of are bounded by their keys' bytes, not their count alone: a
// session's id is the client's to choose, and 1,000 sessions of 64 KB ids
// (sharing one text) must not keep 64 MB of keys.
func TestToolsHintsBoundTheirSessions(t *testing.T) {
	t.Cleanup(func() {
		toolsHints.mu.Lock()
		defer toolsHints.mu.Unlock()
		toolsHints.byDigest, toolsHints.bySession, toolsHints.bytes, toolsHints.keyBytes = nil, nil, 0, 0
	})
	text := strings.Repeat("x", 2048)
	long := strings.Repeat("i", 64<<10)
	for i := range 1000 {
		sawTools("t", fmt.Sprint(long, i), toolsDigest(text), text, true)
	}
	toolsHints.mu.Lock()
	defer toolsHints.mu.Unlock()
	n := 0
	for k, d := range toolsHints.bySession {
		n += len(k) + len(d)
	}
	if n > toolsHintKeyBytes {
		t.Errorf("%d sessions kept with %d bytes of keys, bound %d", len(toolsHints.bySession), n, toolsHintKeyBytes)
	}
	if len(toolsHints.bySession) == 0 {
		t.Error("no session kept")
	}
}
