package engine

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// DefaultViewCacheBytes bounds the decoded active views one engine keeps.
const DefaultViewCacheBytes = 64 << 20

// WithViewCacheBytes bounds the in-process cache of decoded active views
// (0 turns it off).
func WithViewCacheBytes(n int64) Option { return func(e *Engine) { e.views = newViewCache(n) } }

// viewCache keeps decoded active views, so that reading a view that has not
// changed costs no query and no decoding, and one that has only grown costs
// the query of its new messages.
//
// An entry is keyed by (tenant, session) and stamped with what identifies
// the view it holds: the session's incarnation (CreatedAt), model, version,
// the write of that version (UpdatedAt) and view epoch. It is served whole
// only for a session row read with the same stamp, version and write, so it
// can never be stale, whatever other replicas wrote: every change bumps the
// version, and within one view epoch the view only grows at its end
// (store.Session.ViewEpoch). The version alone does not name a view: a
// commit of this process's that the server lost (store.Resendable under
// synchronous_commit off, and a crash or a failover) leaves its version to
// another replica's next write, with other contents, so an entry this
// process extended by its own commits (appended) is served whole only at
// that write, and a newer version extends only the part of it read from
// the database (sure), never the part only this process wrote
// (TestViewCacheLostCommit), and only while the sure part's last message
// is still stored: a read may have shown a commit the server then lost
// (TestViewCacheLostCommitRead; docs/performance.md, the ninth pass, says
// what this does not cover). The cache is bounded by an estimate of the
// bytes it holds, least recently used out first.
type viewCache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	lru   *list.List // of *viewEntry, most recent first
	byKey map[viewKey]*list.Element
}

type viewKey struct{ tenant, session string }

// viewEntry is one cached view. msgs and ords are never modified once the
// entry is stored: a longer view is a new entry (which may share the
// backing array, as append does).
type viewEntry struct {
	key     viewKey
	stamp   viewStamp
	version int64
	// updated is the write of version (the row's UpdatedAt, to the
	// microsecond, as stored).
	updated time.Time
	// sure is how many of msgs are the stored view as a read from the
	// database showed it (at version sureVersion); the rest this process
	// appended by its own commits, which the server may have lost.
	sure        int
	sureVersion int64
	msgs        []chat.Message
	ords        []int64
	bytes       int64
	// answer is 1 + the bytes msgs take in a PrepareContext answer
	// (messageBytes), once a call has needed it (0 before): a view that
	// has not changed is not sized again (preparesize.go).
	answer atomic.Int64
}

// viewStamp identifies a view up to appends: equal stamps mean the older
// view is a prefix of the newer one.
type viewStamp struct {
	created time.Time
	model   string
	epoch   int
}

func stampOf(s *store.Session) viewStamp {
	return viewStamp{created: s.CreatedAt, model: s.Model, epoch: s.ViewEpoch}
}

// sameWrite reports whether two reads of a session's row at one version
// are of the same write: the version and its UpdatedAt, to the
// microsecond (timestamptz keeps microseconds).
func sameWrite(a, b *store.Session) bool {
	return a.Version == b.Version && a.UpdatedAt.Truncate(time.Microsecond).Equal(b.UpdatedAt.Truncate(time.Microsecond))
}

// at reports whether the entry holds the view of s: its version, write
// and stamp.
func (v *viewEntry) at(s *store.Session) bool {
	return v.version == s.Version && v.updated.Equal(s.UpdatedAt.Truncate(time.Microsecond)) && v.stamp == stampOf(s)
}

func newViewCache(maxBytes int64) *viewCache {
	return &viewCache{max: maxBytes, lru: list.New(), byKey: map[viewKey]*list.Element{}}
}

// get returns the entry of a session, if any.
func (c *viewCache) get(tenant, id string) *viewEntry {
	if c == nil || c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[viewKey{tenant, id}]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*viewEntry)
}

// put stores the view of s (msgs with their ordinals) as a read from the
// database showed it, replacing an older entry of the session; a newer one
// already there stays.
func (c *viewCache) put(s *store.Session, msgs []chat.Message, ords []int64, bytes int64) *viewEntry {
	return c.putSure(s, msgs, ords, bytes, len(msgs), s.Version)
}

// wrote stores the view of s that this process's commit wrote (a
// rewrite: compaction, edits): served at that write only (nothing of it is
// sure).
func (c *viewCache) wrote(s *store.Session, msgs []chat.Message, ords []int64, bytes int64) *viewEntry {
	return c.putSure(s, msgs, ords, bytes, 0, 0)
}

// putSure stores the view of s of which the first sure messages are the
// stored view at version sureVersion (the rest this process's own writes).
func (c *viewCache) putSure(s *store.Session, msgs []chat.Message, ords []int64, bytes int64, sure int, sureVersion int64) *viewEntry {
	if c == nil || c.max <= 0 || bytes > c.max/8 {
		return nil // one session may not take more than an eighth of the cache
	}
	key := viewKey{s.Tenant, s.ID}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		old := el.Value.(*viewEntry)
		if old.version > s.Version && old.stamp.created.Equal(s.CreatedAt) {
			return nil
		}
		c.remove(el)
	}
	e := &viewEntry{key: key, stamp: stampOf(s), version: s.Version, updated: s.UpdatedAt.Truncate(time.Microsecond),
		sure: sure, sureVersion: sureVersion, msgs: msgs, ords: ords, bytes: bytes}
	c.byKey[key] = c.lru.PushFront(e)
	c.used += bytes
	for c.used > c.max {
		c.remove(c.lru.Back())
	}
	return e
}

// drop removes the session's entry.
func (c *viewCache) drop(tenant, id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[viewKey{tenant, id}]; ok {
		c.remove(el)
	}
}

func (c *viewCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*viewEntry)
	delete(c.byKey, e.key)
	c.used -= e.bytes
}

// appended extends the entry at the version before an append that this
// process committed (before → after, adding msgs at ordinals after
// before.ViewSeq), so the agent loop's next read needs no query. What it
// adds is not sure: the server may lose the commit.
func (c *viewCache) appended(before, after *store.Session, msgs []chat.Message) {
	e := c.get(after.Tenant, after.ID)
	if e == nil || !e.at(before) || stampOf(before) != stampOf(after) ||
		after.ViewSeq != before.ViewSeq+int64(len(msgs)) || int64(len(e.msgs)+len(msgs)) != after.ActiveCount {
		return
	}
	ords := make([]int64, len(msgs))
	for i := range ords {
		ords[i] = before.ViewSeq + int64(i) + 1
	}
	// The capped slices make append copy: entries never share a backing
	// array that another writer could append into.
	longer := c.putSure(after, append(e.msgs[:len(e.msgs):len(e.msgs)], msgs...), append(e.ords[:len(e.ords):len(e.ords)], ords...),
		e.bytes+messagesBytes(msgs), e.sure, e.sureVersion)
	if n := e.answer.Load(); n > 0 && longer != nil {
		longer.answer.CompareAndSwap(0, n+int64(answerBytes(msgs)))
	}
}

// messagesBytes estimates the memory a decoded message holds.
func messagesBytes(msgs []chat.Message) int64 {
	var n int64
	for i := range msgs {
		m := &msgs[i]
		n += 256 + int64(len(m.ID)+len(m.Name)+16*len(m.Replaces))
		for k, v := range m.Metadata {
			n += int64(len(k) + len(v) + 32)
		}
		for _, p := range m.Parts {
			n += 64 + int64(len(p.Text))
			if p.ToolCall != nil {
				n += 64 + int64(len(p.ToolCall.ID)+len(p.ToolCall.Name)+len(p.ToolCall.Arguments))
			}
			if p.ToolResult != nil {
				n += 64 + int64(len(p.ToolResult.ToolCallID)+len(p.ToolResult.Content))
			}
			if p.Image != nil {
				n += 128
			}
		}
	}
	return n
}

// viewOf returns the active view of session s, with each message's
// ordinal, as of s.Version when it can prove it: from the cache when the
// entry is at that version and write, by reading only the messages after
// the part of an entry of the same view epoch that a read showed (sure), or
// by reading the whole view; a read is
// confirmed by reading the session again and finding the version unchanged
// (and only then cached). If the session keeps changing under it (three
// reads), it fails with store.ErrVersionConflict. It also returns the session the view
// belongs to (s, or a newer read). The slices returned are shared: callers
// must not modify them or the messages in them.
func (e *Engine) viewOf(ctx context.Context, s store.Session) ([]chat.Message, []int64, store.Session, error) {
	for attempt := 0; ; attempt++ {
		var msgs []chat.Message
		var ords []int64
		var bytes, answer int64
		var confirm *store.Session // the row read after the view, when read with it
		ent := e.views.get(s.Tenant, s.ID)
		switch {
		case ent != nil && ent.at(&s):
			return ent.msgs, ent.ords, s, nil
		case ent != nil && ent.sure > 0 && ent.sureVersion <= s.Version && ent.stamp == stampOf(&s) &&
			ent.ords[ent.sure-1] <= s.ViewSeq:
			// Read from the sure part's last message on: a read may
			// have shown a commit the server then lost (synchronous
			// commit off: visible before its WAL is flushed), whose
			// ordinals another replica then wrote with other messages.
			// Within an epoch the view only grows at its end, and a
			// server loses its last commits, so the sure part is stored
			// while its last message is (its id and write time).
			n := ent.sure
			var prev int64
			if n > 1 {
				prev = ent.ords[n-2]
			}
			tail, tailOrds, row, err := e.tailAndRow(ctx, s.Tenant, s.ID, prev)
			if err != nil {
				return nil, nil, s, err
			}
			if len(tail) == 0 || tailOrds[0] != ent.ords[n-1] || !sameStored(&tail[0], &ent.msgs[n-1]) {
				// Not the stored view's: read it whole.
				if msgs, ords, err = e.activeAfter(ctx, s.Tenant, s.ID, 0); err != nil {
					return nil, nil, s, err
				}
				bytes = messagesBytes(msgs)
				break
			}
			confirm = row
			msgs = append(ent.msgs[:n-1:n-1], tail...)
			ords = append(ent.ords[:n-1:n-1], tailOrds...)
			if n < len(ent.msgs) {
				bytes = messagesBytes(msgs)
			} else if bytes = ent.bytes + messagesBytes(tail[1:]); ent.answer.Load() > 0 {
				answer = ent.answer.Load() + int64(answerBytes(tail[1:])) // the prefix is not sized again
			}
		default:
			var err error
			if msgs, ords, err = e.activeAfter(ctx, s.Tenant, s.ID, 0); err != nil {
				return nil, nil, s, err
			}
			bytes = messagesBytes(msgs)
		}
		var now store.Session
		var err error
		if confirm != nil {
			now = *confirm
		} else if now, err = e.readSession(ctx, s.Tenant, s.ID); err != nil {
			return nil, nil, s, err
		}
		if now.Version == s.Version {
			if int64(len(msgs)) == s.ActiveCount {
				if longer := e.views.put(&s, msgs, ords, bytes); longer != nil && answer > 0 {
					longer.answer.CompareAndSwap(0, answer)
				}
			}
			return msgs, ords, s, nil
		}
		if attempt == 2 {
			// The view read belongs to no version it can prove: never
			// pair it with a session (a caller would take it as that
			// version's view).
			return nil, nil, now, fmt.Errorf("session %q kept changing while its view was read; try again: %w", s.ID, store.ErrVersionConflict)
		}
		s = now
	}
}

// sameStored reports whether two reads of a stored message are of the
// same write: its id (its log position) and its write time.
func sameStored(a, b *chat.Message) bool {
	return a.ID == b.ID && a.CreatedAt.Equal(b.CreatedAt)
}

// viewOrds returns the ordinals 1..n of a view just rewritten.
func viewOrds(n int) []int64 {
	ords := make([]int64, n)
	for i := range ords {
		ords[i] = int64(i) + 1
	}
	return ords
}

func lastOrd(ords []int64) int64 {
	if len(ords) == 0 {
		return 0
	}
	return ords[len(ords)-1]
}

// tailAndRow reads the active view after an ordinal and then the
// session's row (nil when the view took more than a page: then not
// read), in one round trip on a store that reads both at once
// (store.ViewTailReader, PostgreSQL).
func (e *Engine) tailAndRow(ctx context.Context, tenant, id string, after int64) ([]chat.Message, []int64, *store.Session, error) {
	r, ok := e.store.(store.ViewTailReader)
	if !ok {
		msgs, ords, err := e.activeAfter(ctx, tenant, id, after)
		return msgs, ords, nil, err
	}
	msgs, ords, row, err := r.ActiveMessagesAndSession(ctx, tenant, id, after, 1000)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil || len(msgs) < 1000 {
		return msgs, ords, &row, err
	}
	more, moreOrds, err := e.activeAfter(ctx, tenant, id, ords[len(ords)-1])
	return append(msgs, more...), append(ords, moreOrds...), nil, err
}

// activeAfter reads the active view after an ordinal, page by page.
func (e *Engine) activeAfter(ctx context.Context, tenant, id string, after int64) ([]chat.Message, []int64, error) {
	var out []chat.Message
	var outOrds []int64
	for {
		page, ords, err := e.store.ActiveMessages(ctx, tenant, id, after, 1000)
		if err != nil {
			return nil, nil, err
		}
		out, outOrds = append(out, page...), append(outOrds, ords...)
		if len(page) < 1000 {
			return out, outOrds, nil
		}
		after = ords[len(ords)-1]
	}
}

// page returns up to limit messages of the cached view of s after an
// ordinal, with their ordinals, when the cache holds the view at s's
// version.
func (c *viewCache) page(s *store.Session, ord int64, limit int) ([]chat.Message, []int64, bool) {
	ent := c.get(s.Tenant, s.ID)
	if ent == nil || !ent.at(s) {
		return nil, nil, false
	}
	msgs, ords := after(ent.msgs, ent.ords, ord)
	n := min(limit, len(msgs))
	return msgs[:n:n], ords[:n:n], true
}

// after returns the part of a view (msgs with ascending ords) after an
// ordinal.
func after(msgs []chat.Message, ords []int64, ord int64) ([]chat.Message, []int64) {
	i := sort.Search(len(ords), func(i int) bool { return ords[i] > ord })
	return msgs[i:], ords[i:]
}
