package gateway

import (
	"container/list"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// logCache is the replica's hot state of the sessions it serves: the
// identities (identityOf) and details of each session's log messages, so a
// request matches its history without reading the log. The log is
// append-only, so what was read stays true: a request reads only the log's
// tail after what the cache holds — nothing when the session's log count,
// which the request's one indexed session read returns, says nothing is
// new — and a session deleted and created again under its id is told apart
// by its creation time. Another replica's append moves the log count, so
// its messages are read before they are matched. Bounded by the bytes it
// holds (logCacheBytes), least recently used session out first.
type logCache struct {
	mu      sync.Mutex
	max     int64
	held    int64
	lru     *list.List // of *logEntry, most recent first
	entries map[string]*list.Element
	// heads are the entries by their log's head: tenant, NUL, the history
	// chain of the log's last client message (lastserved.go).
	heads map[string]*logEntry
}

type logEntry struct {
	key, tenant, id string
	// size is what the cache accounts for the entry, and head the chain it
	// is filed under in heads (under logCache.mu).
	size int64
	head string

	mu      sync.Mutex
	created time.Time
	last    int64 // position of the last log message read
	// chain is the history chain of the log's last client message ("" when
	// it has none: appended through the API).
	chain   string
	digests [][32]byte
	// restart is how many of digests' first messages the client's latest
	// compaction of its history appended (0: none restarted the log).
	restart int
	details [][16]byte // detailOf each message (what its identity leaves out)
	replies []bool     // digests[i] is a reply the gateway recorded
	// closed holds the tool calls contextd closed with an interrupted
	// result (a clear, or a turn that went on without the result).
	closed map[string]bool
}

// logCacheBytes bounds the logs' identities a gateway holds: at 57 bytes
// a message, about 1.2 million messages.
const logCacheBytes = 64 << 20

// logEntryBytes is what an entry costs besides its messages (its key, the
// map and list cells, the struct).
const logEntryBytes = 256

// bytes is what ent holds (under ent.mu).
func (ent *logEntry) bytes() int64 {
	return logEntryBytes + int64(len(ent.key)) + int64(cap(ent.digests))*32 + int64(cap(ent.details))*16 + int64(cap(ent.replies)) +
		int64(len(ent.closed))*64
}

func newLogCache(maxBytes int64) *logCache {
	return &logCache{max: maxBytes, lru: list.New(), entries: map[string]*list.Element{}, heads: map[string]*logEntry{}}
}

// entry is the session's entry, made (empty) when there is none or the one
// there is of another incarnation; nil when make is false and there is
// none to extend.
func (lc *logCache) entry(tenant, id string, created time.Time, make bool) *logEntry {
	key := tenant + "\x00" + id
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if el, ok := lc.entries[key]; ok {
		ent := el.Value.(*logEntry)
		if ent.created.Equal(created) {
			lc.lru.MoveToFront(el)
			return ent
		}
		lc.remove(el)
	}
	if !make {
		return nil
	}
	ent := &logEntry{key: key, tenant: tenant, id: id, created: created, size: logEntryBytes + int64(len(key))}
	lc.entries[key] = lc.lru.PushFront(ent)
	lc.held += ent.size
	lc.evict(ent)
	return ent
}

func (lc *logCache) remove(el *list.Element) {
	ent := lc.lru.Remove(el).(*logEntry)
	delete(lc.entries, ent.key)
	lc.held -= ent.size
	lc.file(ent, "")
}

// file files ent under the head chain (none: "") (under lc.mu).
func (lc *logCache) file(ent *logEntry, chain string) {
	if ent.head == chain {
		return
	}
	if ent.head != "" && lc.heads[ent.tenant+"\x00"+ent.head] == ent {
		delete(lc.heads, ent.tenant+"\x00"+ent.head)
	}
	ent.head = chain
	if chain != "" {
		lc.heads[ent.tenant+"\x00"+chain] = ent
	}
}

// evict drops the least recently used entries (never keep) while the
// cache holds more than its bound.
func (lc *logCache) evict(keep *logEntry) {
	for lc.held > lc.max {
		el := lc.lru.Back()
		if el == nil || el.Value.(*logEntry) == keep {
			return
		}
		lc.remove(el)
	}
}

// update accounts ent at size (its new bytes) and files it under its
// log's head chain, if it is still held.
func (lc *logCache) update(ent *logEntry, size int64, chain string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if el, ok := lc.entries[ent.key]; !ok || el.Value.(*logEntry) != ent {
		return
	}
	lc.held += size - ent.size
	ent.size = size
	lc.file(ent, chain)
	lc.evict(ent)
}

// add appends a client message of the log to ent (under ent.mu).
func (ent *logEntry) add(m *chat.Message) {
	if restarts(m) { // the client compacted its history (clientcompaction.go)
		ent.digests, ent.details, ent.replies = nil, nil, nil
		ent.restart = restartLen(m)
	}
	if n, id, ok := pickedOf(m); ok && n <= len(ent.digests) {
		// The client's version of the turn before m stands for its last
		// n messages (picks.go). Clipped: get's callers hold the slices.
		keep := len(ent.digests) - n
		ent.digests = append(slices.Clip(ent.digests[:keep]), id)
		ent.details = append(slices.Clip(ent.details[:keep]), [16]byte{})
		ent.replies = append(slices.Clip(ent.replies[:keep]), false)
	}
	ent.digests = append(ent.digests, identityOf(m))
	ent.details = append(ent.details, detailOf(m))
	ent.replies = append(ent.replies, m.Metadata[metaReply] != "")
	ent.chain = ""
	if h, ok := store.HistoryOf(m); ok {
		ent.chain = h.Chain
	}
}

// get returns the digests of the client-visible messages of s's log, in
// order (interrupted tool results contextd inserted are not the client's),
// and how many of the first the client's latest compaction appended.
func (lc *logCache) get(ctx context.Context, e *engine.Engine, tenant string, s store.Session) ([][32]byte, [][16]byte, []bool, map[string]bool, int, error) {
	ent := lc.entry(tenant, s.ID, s.CreatedAt, true)
	ent.mu.Lock()
	defer ent.mu.Unlock()
	added := false
	for ent.last < s.LogCount {
		msgs, err := e.LogTailOf(ctx, s, ent.last, 0) // s read by the caller: not again
		if err != nil {
			return nil, nil, nil, nil, 0, err
		}
		if len(msgs) == 0 {
			break
		}
		added = true
		for i := range msgs {
			m := &msgs[i]
			ent.last = m.Position
			if m.Metadata[engine.InterruptedMetadata] != "" {
				if ent.closed == nil {
					ent.closed = map[string]bool{}
				}
				ent.closed[resultOf(m)] = true
				continue
			}
			if m.Kind != "" && m.Kind != chat.KindNormal {
				continue
			}
			ent.add(m)
		}
	}
	out := ent.digests[:len(ent.digests):len(ent.digests)]
	details := ent.details[:len(ent.details):len(ent.details)]
	replies := ent.replies[:len(ent.replies):len(ent.replies)]
	var closed map[string]bool
	if len(ent.closed) > 0 {
		closed = maps.Clone(ent.closed)
	}
	if added {
		lc.update(ent, ent.bytes(), ent.chain)
	}
	return out, details, replies, closed, min(ent.restart, len(out)), nil
}

// extend records msgs, just stored with their log positions, after what
// the cache holds of the session created at created, so the next request
// reads nothing. Unless they follow the cached log without a gap (another
// writer came between, contextd inserted a message), nothing is recorded
// and the next request reads the log's tail as usual.
func (lc *logCache) extend(tenant, id string, created time.Time, msgs []chat.Message) {
	if len(msgs) == 0 {
		return
	}
	ent := lc.entry(tenant, id, created, msgs[0].Position == 1)
	if ent == nil {
		return
	}
	ent.mu.Lock()
	defer ent.mu.Unlock()
	pos := ent.last
	for i := range msgs {
		if msgs[i].Position != pos+1 || msgs[i].Kind != "" && msgs[i].Kind != chat.KindNormal || msgs[i].Metadata[engine.InterruptedMetadata] != "" {
			return
		}
		pos++
	}
	for i := range msgs {
		ent.add(&msgs[i])
	}
	ent.last = pos
	lc.update(ent, ent.bytes(), ent.chain)
}

// headOf is the session whose log's head is the latest of chains (tenant's)
// this cache holds, looking at the last n, and that chain's index; "" when
// none is.
func (lc *logCache) headOf(tenant string, chains []string, n int) (string, int) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for i := len(chains) - 1; i >= 0 && i >= len(chains)-n; i-- {
		if ent, ok := lc.heads[tenant+"\x00"+chains[i]]; ok {
			return ent.id, i
		}
	}
	return "", 0
}
