package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// TestViewCacheBound: the cache never holds more than its byte bound,
// evicts the least recently used session first, refuses a view larger than
// an eighth of it, and never replaces a newer view by an older one.
func TestViewCacheBound(t *testing.T) {
	const max = 200_000
	c := newViewCache(max)
	view := func(n, size int) ([]chat.Message, []int64) {
		msgs := make([]chat.Message, n)
		for i := range msgs {
			msgs[i] = chat.Message{ID: fmt.Sprintf("msg_%d", i+1), Role: chat.RoleUser,
				Parts: []chat.Part{{Type: chat.PartText, Text: strings.Repeat("x", size)}}}
		}
		return msgs, viewOrds(n)
	}
	created := time.Unix(1, 0)
	sess := func(id string, version int64) *store.Session {
		return &store.Session{Tenant: "t", ID: id, Version: version, CreatedAt: created, ActiveCount: 10}
	}
	for i := range 100 {
		msgs, ords := view(10, 1000)
		c.put(sess(fmt.Sprint(i), 1), msgs, ords, messagesBytes(msgs))
		if c.used > max {
			t.Fatalf("after %d views the cache holds %d bytes, over its bound %d", i+1, c.used, max)
		}
		if i == 0 || i%2 == 1 {
			c.get("t", "0") // keep session 0 recently used
		}
	}
	if c.get("t", "0") == nil || c.get("t", "1") != nil || c.get("t", "99") == nil {
		t.Errorf("eviction is not least-recently-used first")
	}
	big, ords := view(100, 1000)
	c.put(sess("big", 1), big, ords, messagesBytes(big))
	if c.get("t", "big") != nil {
		t.Errorf("a view of %d bytes was cached in a cache of %d", messagesBytes(big), max)
	}
	msgs, ords := view(10, 10)
	c.put(sess("v", 5), msgs, ords, messagesBytes(msgs))
	c.put(sess("v", 4), msgs[:9], ords[:9], messagesBytes(msgs[:9]))
	if e := c.get("t", "v"); e == nil || e.version != 5 {
		t.Errorf("an older view replaced a newer one: %+v", e)
	}
	var off *viewCache
	off.put(sess("x", 1), msgs, ords, 1)
	if newViewCache(0).get("t", "x") != nil || off.get("t", "x") != nil {
		t.Error("a disabled cache returned a view")
	}
}
