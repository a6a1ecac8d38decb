package gateway

import (
	"context"
	"encoding/base32"
	"errors"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

func encodeID(b []byte) string {
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)[:26])
}

// unmake deletes a session this request created when the request failed
// before anything was stored in it, so a refused call leaves nothing.
func (g *Gateway) unmake(ctx context.Context, tenant string, res resolved) {
	if !res.made {
		return
	}
	ctx, cancel := detach(ctx)
	defer cancel()
	// Compare and delete in one statement: a concurrent request that
	// wrote to the session, or made it again, keeps it.
	_, _ = g.cfg.Engine.DeleteUnusedSession(ctx, tenant, res.id, res.created)
}

// create makes the session of a conversation, labelled with the door, and
// returns its creation time; made is false when it existed already (a
// concurrent twin of the request made it).
func (g *Gateway) create(ctx context.Context, tenant, id string, d door, c *conversation) (created time.Time, made bool, err error) {
	v, err := g.cfg.Engine.CreateSession(ctx, tenant, engine.NewSession{
		ID: id, Model: c.model, System: c.system, Tools: c.tools,
		Labels: map[string]string{SessionLabel: d.name()},
	})
	if errors.Is(err, store.ErrAlreadyExists) {
		return time.Time{}, false, nil
	}
	return v.CreatedAt, err == nil, err
}

// follow brings the session's model, system prompt and tools to the
// request's, when the client changed them (an ordinary, versioned update),
// and returns the session as updated (nil: unchanged).
func (g *Gateway) follow(ctx context.Context, tenant string, s store.Session, c *conversation) (*store.Session, error) {
	var mask []string
	if s.Model != c.model {
		mask = append(mask, engine.FieldModel)
	}
	if s.SystemPrompt != c.system {
		mask = append(mask, engine.FieldSystemPrompt)
	}
	if !sameTools(s.Tools, c.tools) {
		mask = append(mask, engine.FieldTools)
	}
	if len(mask) == 0 {
		return nil, nil
	}
	v, err := g.cfg.Engine.UpdateSession(ctx, tenant, s.ID, engine.SessionUpdate{Mask: mask, Model: c.model, System: c.system, Tools: c.tools,
		ExpectedVersion: &s.Version})
	if err != nil {
		return nil, err
	}
	return &v.Session, nil
}

func sameTools(a, b []chat.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		// The same text needs no parsing (the common case: a client
		// resends its tools as they were); only a difference is compared
		// as canonical JSON.
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description ||
			a[i].Parameters != b[i].Parameters && string(canonicalJSON([]byte(a[i].Parameters))) != string(canonicalJSON([]byte(b[i].Parameters))) {
			return false
		}
	}
	return true
}

// logCache keeps the identities (identityOf) of sessions' logs' messages. The log is append-only, so
// what was read stays true: a request reads only the log's tail after what
// the cache holds (one indexed read when nothing is new), and a session
// deleted and created again under its id is told apart by its creation
// time. Bounded by sessions and by digests; when full it starts over.
type logCache struct {
	mu         sync.Mutex
	maxDigests int
	held       int
	entries    map[string]*logEntry
}

type logEntry struct {
	mu      sync.Mutex
	created time.Time
	last    int64 // position of the last log message read
	digests [][32]byte
	details [][16]byte // detailOf each message (what its identity leaves out)
	replies []bool     // digests[i] is a reply the gateway recorded
	// closed holds the tool calls contextd closed with an interrupted
	// result (a clear, or a turn that went on without the result).
	closed map[string]bool
}

// maxCachedSessions bounds the sessions logCache holds.
const maxCachedSessions = 4096

func newLogCache(maxDigestsHeld int) *logCache {
	return &logCache{maxDigests: maxDigestsHeld * 256, entries: map[string]*logEntry{}}
}

// get returns the digests of the client-visible messages of s's log, in
// order (interrupted tool results contextd inserted are not the client's).
func (lc *logCache) get(ctx context.Context, e *engine.Engine, tenant string, s store.Session) ([][32]byte, [][16]byte, []bool, map[string]bool, error) {
	key := tenant + "\x00" + s.ID
	lc.mu.Lock()
	ent, ok := lc.entries[key]
	if !ok || !ent.created.Equal(s.CreatedAt) {
		if len(lc.entries) >= maxCachedSessions || lc.held > lc.maxDigests {
			lc.entries, lc.held = map[string]*logEntry{}, 0
		}
		if ok {
			lc.held -= len(ent.digests)
		}
		ent = &logEntry{created: s.CreatedAt}
		lc.entries[key] = ent
	}
	lc.mu.Unlock()

	ent.mu.Lock()
	defer ent.mu.Unlock()
	added := 0
	for ent.last < s.LogCount {
		msgs, err := e.LogTail(ctx, tenant, s.ID, ent.last, 1000)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if len(msgs) == 0 {
			break
		}
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
			ent.digests = append(ent.digests, identityOf(m))
			ent.details = append(ent.details, detailOf(m))
			ent.replies = append(ent.replies, m.Metadata[metaReply] != "")
			added++
		}
	}
	out := ent.digests[:len(ent.digests):len(ent.digests)]
	details := ent.details[:len(ent.details):len(ent.details)]
	replies := ent.replies[:len(ent.replies):len(ent.replies)]
	closed := maps.Clone(ent.closed)
	lc.mu.Lock()
	lc.held += added
	lc.mu.Unlock()
	return out, details, replies, closed, nil
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
	key := tenant + "\x00" + id
	lc.mu.Lock()
	ent, ok := lc.entries[key]
	if !ok || !ent.created.Equal(created) {
		if msgs[0].Position != 1 || len(lc.entries) >= maxCachedSessions || lc.held > lc.maxDigests {
			lc.mu.Unlock()
			return
		}
		if ok {
			lc.held -= len(ent.digests)
		}
		ent = &logEntry{created: created}
		lc.entries[key] = ent
	}
	lc.held += len(msgs)
	lc.mu.Unlock()

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
		ent.digests = append(ent.digests, identityOf(&msgs[i]))
		ent.details = append(ent.details, detailOf(&msgs[i]))
		ent.replies = append(ent.replies, msgs[i].Metadata[metaReply] != "")
	}
	ent.last = pos
}

// resultOf is the call a tool message answers ("" for other messages).
func resultOf(m *chat.Message) string {
	if m.Role != chat.RoleTool {
		return ""
	}
	for _, p := range m.Parts {
		if p.Type == chat.PartToolResult {
			return p.ToolResult.ToolCallID
		}
	}
	return ""
}
