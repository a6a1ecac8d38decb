package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
)

// TestLogCacheIsBoundedByBytesLRU: the logs' identities a replica keeps
// are bounded by the bytes they hold, the session used least recently
// leaving first, and what the cache accounts is what its entries hold.
func TestLogCacheIsBoundedByBytesLRU(t *testing.T) {
	created := time.Unix(1700000000, 0)
	msgs := func(n int) []chat.Message {
		out := make([]chat.Message, n)
		for i := range out {
			out[i] = chat.Message{Role: chat.RoleUser, Position: int64(i + 1), Parts: []chat.Part{{Type: chat.PartText, Text: fmt.Sprint(i)}}}
		}
		return out
	}
	const bound = 64 << 10
	lc := newLogCache(bound)
	for i := range 100 {
		lc.extend("t", fmt.Sprint("s", i), created, msgs(100)) // about 6 KB each
		lc.entry("t", "s0", created, false)                    // s0 stays in use
	}
	var sum int64
	for el := lc.lru.Front(); el != nil; el = el.Next() {
		ent := el.Value.(*logEntry)
		if ent.size != ent.bytes() {
			t.Errorf("%q: accounted %d bytes, holds %d", ent.key, ent.size, ent.bytes())
		}
		sum += ent.size
	}
	if lc.held != sum || lc.held > bound {
		t.Errorf("the cache accounts %d bytes, its entries hold %d, bound %d", lc.held, sum, bound)
	}
	if n := len(lc.entries); n < 5 || n > 15 {
		t.Errorf("%d sessions held within 64 KB, want about 10", n)
	}
	if lc.entry("t", "s0", created, false) == nil || lc.entry("t", "s99", created, false) == nil {
		t.Error("the session in use or the newest one was evicted")
	}
	if lc.entry("t", "s50", created, false) != nil {
		t.Error("a session unused since 49 others came is still held")
	}
	// Another incarnation of a session is not its entry.
	if lc.entry("t", "s99", created.Add(time.Second), false) != nil {
		t.Error("a session made again under its id was served the old log")
	}
}
