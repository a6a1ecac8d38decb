package gateway

import (
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// TestMemoSharedMessagesStayUnstamped: the memo's messages are shared by
// every request that resends them (any tenant's): stamping one request's
// messages with their place in its history (historyStamp) leaves what
// another request gets from the memo as the client sent it.
func TestMemoSharedMessagesStayUnstamped(t *testing.T) {
	d := openAIChat{newMemo(memoBytes)}
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":"go on"}]}`
	parse := func() *conversation {
		c, err := d.parse(mustScan(t, body))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	parse() // fills the memo
	a := parse()
	historyChains(doorOpenAIChat, signal{scope: "tenant-a"}, a)
	historyStamp(a, a.msgs, 0)
	for i := range a.msgs {
		if _, ok := a.msgs[i].Metadata[store.HistoryMetadata]; !ok {
			t.Fatalf("message %d was not stamped", i)
		}
	}
	b := parse()
	for i := range b.msgs {
		if h, ok := b.msgs[i].Metadata[store.HistoryMetadata]; ok {
			t.Errorf("message %d of another request came from the memo stamped %q", i, h)
		}
	}
}
