package postgres

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestToolsHintsBoundTheirSessions: the sessions this process remembers
// the tools of are bounded by their keys' bytes, not their count alone: a
// session's id is the client's to choose, and 1,000 sessions of 64 KB ids
// (sharing one text) must not keep 64 MB of keys.
func TestToolsHintsBoundTheirSessions(t *testing.T) {
	t.Cleanup(ForgetToolsHints)
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

// TestToolsHintsConcurrent: sessions' tools remembered and looked up from
// many goroutines, the set starting over all along (texts of 1 MB, the
// bound 8 MB): every hint found is a text under its own digest (run with
// -race).
func TestToolsHintsConcurrent(t *testing.T) {
	t.Cleanup(ForgetToolsHints)
	texts := make([]string, 12)
	for i := range texts {
		texts[i] = strings.Repeat(fmt.Sprint(i), 1<<20)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				text := texts[(g+i)%len(texts)]
				id := fmt.Sprint(i % 7)
				if i%2 == 0 {
					sawTools("t", id, toolsDigest(text), text, true)
				} else if h := toolsHintOf("t", id); h.digest != "" && toolsDigest(h.text) != h.digest {
					t.Errorf("session %s: a text not of its digest", id)
					return
				}
			}
		}()
	}
	wg.Wait()
}
