package gateway

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// editFixture is a request of n messages and its session's view, stored
// as the gateway stores them (log positions, history chains, digests).
func editFixture(n int) (*conversation, []chat.Message) {
	c := &conversation{}
	for i := range n {
		m := chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: fmt.Sprintf("message %d: %s", i, strings.Repeat("lorem ipsum ", 20))}}}
		if i%2 == 1 {
			m.Role = chat.RoleTool
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: fmt.Sprintf("call_%d", i), Content: strings.Repeat("output ", 100)}}}
		}
		stamp(&m, nil)
		c.msgs = append(c.msgs, m)
	}
	historyChains(doorAnthropic, signal{}, c)
	view := make([]chat.Message, n)
	for i := range c.msgs {
		view[i] = clientCopy(&c.msgs[i], &c.msgs[i])
		view[i].ID, view[i].Position, view[i].Kind = "msg_"+strconv.Itoa(i+1), int64(i+1), chat.KindNormal
		setMeta(&view[i], store.HistoryMetadata, strconv.Itoa(i+1)+":"+c.chains[i])
	}
	return c, view
}

// TestClientVersion: a stored message the request resends unchanged has
// no client version; one it cleared has, at its place, and so has the
// edit that then stands for it (no log position of its own).
func TestClientVersion(t *testing.T) {
	c, view := editFixture(6)
	for i := range view {
		if _, ok := clientVersion(&view[i], c); ok {
			t.Fatalf("unchanged message %d has a client version", i)
		}
	}
	c.msgs[3].Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "call_3", Content: "[Old tool result content cleared]"}}}
	stamp(&c.msgs[3], nil)
	c.sent = sentPlaces{} // another request's conversation: its places are looked up again (sentOf)
	v, ok := clientVersion(&view[3], c)
	if !ok || v.Parts[0].ToolResult.Content != "[Old tool result content cleared]" || v.ID != "msg_4" {
		t.Fatalf("cleared result: %+v, %v", v, ok)
	}
	edit := v
	edit.ID, edit.Position = "edit_1_1", 0
	setMeta(&edit, "contextd.edit_of", "msg_4")
	if clientOf(&edit, c) != &c.msgs[3] {
		t.Errorf("the edit is not found at its original's place")
	}
	if _, ok := clientVersion(&edit, c); ok {
		t.Errorf("the edit, resent as it is, has a client version")
	}
}

// BenchmarkClientVersions: what finding client edits and putting the
// client's versions in the view (asSent) cost a request that has none, per
// view of 1,000 messages (one clientVersion per message, then asSent).
func BenchmarkClientVersions(b *testing.B) {
	c, view := editFixture(1000)
	b.ReportAllocs()
	for b.Loop() {
		c.sent = sentPlaces{} // each iteration a request of its own
		for i := range view {
			if _, ok := clientVersion(&view[i], c); ok {
				b.Fatal("an edit")
			}
		}
		if out := asSent(view, c); &out[0] != &view[0] {
			b.Fatal("a client version")
		}
	}
}

// TestSentPlacesCheckTheID: what a request found of a stored message is
// kept by its log position, and only the message of that ID gets it: an
// other message at the same position is looked up on its own. (The store
// names a log message "msg_" and its position in every session, so the ID
// does not tell sessions apart: prepare forgets the places at each match,
// TestRetryInAnotherSessionSendsItsOwnPlaces in test/gateway.)
func TestSentPlacesCheckTheID(t *testing.T) {
	c, view := editFixture(6)
	for i := range view {
		if client, same := c.sentOf(&view[i]); client != &c.msgs[i] || !same {
			t.Fatalf("message %d: %v, %v", i, client, same)
		}
	}
	other := view[2]
	other.ID = "msg_other"
	setMeta(&other, store.HistoryMetadata, "4:"+c.chains[3]) // the client's message 4, at message 3's position
	if client, _ := c.sentOf(&other); client != &c.msgs[3] {
		t.Errorf("another message at a kept position: the client's %v, want message 4", client)
	}
	none := view[4]
	none.ID = "msg_none"
	setMeta(&none, store.HistoryMetadata, "5:another chain")
	if client, _ := c.sentOf(&none); client != nil {
		t.Errorf("a message the client did not send, at a kept position: %v", client)
	}
}

// TestViewDigest: the digest a door's build looks the client's JSON up
// by is the stored copy's, whether the request kept it (the same bytes)
// or not (the client's version, put in by asSent).
func TestViewDigest(t *testing.T) {
	c, view := editFixture(6)
	c.msgs[3].Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "call_3", Content: "[Old tool result content cleared]"}}}
	stamp(&c.msgs[3], nil)
	for i := range c.msgs {
		c.digests = append(c.digests, storedDigest(&c.msgs[i]))
	}
	sent := asSent(view, c)
	for i := range sent {
		if got, want := c.viewDigest(&sent[i]), storedDigest(&sent[i]); got != want {
			t.Errorf("message %d: digest %x, want %x", i, got[:4], want[:4])
		}
	}
	if c.viewDigest(&view[3]) == storedDigest(&c.msgs[3]) {
		t.Errorf("the stored copy of the cleared result has the client's digest")
	}
}

// TestSentPlacesBounded: what sentOf keeps is bounded by the request's
// messages, not by how far apart the view's log positions lie (a long
// log's early message, pinned, and its latest): a message far past the
// first is looked up each time, and found all the same. Fails without
// the bound: a million places kept (24 MB) for a request of six messages.
func TestSentPlacesBounded(t *testing.T) {
	c, view := editFixture(6)
	if client, same := c.sentOf(&view[0]); client != &c.msgs[0] || !same {
		t.Fatalf("message 1: %v, %v", client, same)
	}
	far := view[5]
	far.Position, far.ID = 1_000_000, "msg_1000000"
	for range 2 {
		if client, same := c.sentOf(&far); client != &c.msgs[5] || !same {
			t.Fatalf("a message far past the first: %v, %v", client, same)
		}
	}
	if n, bound := cap(c.sent.at), 2*len(c.msgs)+16; n > bound {
		t.Errorf("%d places kept for a request of %d messages, want at most %d", n, len(c.msgs), bound)
	}
	if c.viewDigest(&far) != storedDigest(&c.msgs[5]) {
		t.Errorf("the far message's digest")
	}
}
