package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// How a request's history related to its session's log, as the
// X-Contextd-History header says it.
const (
	historyNew       = "new"       // the session was created by this request
	historyExtended  = "extended"  // the request added messages to the log
	historyUnchanged = "unchanged" // nothing new (a retry, or a repeated call)
	historyRepeated  = "repeated"  // the request again, without the reply it got: answered from the session, nothing stored
	historyRewound   = "rewound"   // the request is a strict prefix of the log: a new session
	historyEdited    = "edited"    // the request's last message differs from the log's: a new session
	historyForked    = "forked"    // the request differs from the log earlier and goes on: a new session
)

// maxForkHops bounds the walk from a conversation's first session through
// the sessions of its edits and rewinds.
const maxForkHops = 32

// resolved is the session a request landed in, and what to append to it.
type resolved struct {
	id      string
	created time.Time // the session's creation time (its incarnation)
	made    bool      // this request created the session
	version int64     // the session's version the log was matched at
	// repeat: the request is the session's history but for its last
	// replies (a retry of a call that was answered, or a second sample):
	// it is sent without those replies and nothing is stored.
	repeat  int
	repeatD [][32]byte // the digests of those replies
	history string
	from    string // the session this one forked from, if any
	fresh   []chat.Message
}

// derivedID names the session of a conversation whose client sent no
// session header: the tenant, the door, and a digest of the conversation's
// start (system prompt and first message).
func derivedID(tenant, door string, c *conversation) string {
	h := sha256.New()
	for _, s := range []string{"contextd-gateway-v1", tenant, door, c.system} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	if len(c.digests) > 0 {
		h.Write(c.digests[0][:])
	}
	return "gw-" + encodeID(h.Sum(nil))
}

// forkID names the session a request goes on in when its history leaves
// session id after the k messages they share (digests[:k]): every branch
// from that point (an edit of message k, a rewind to it) goes there, and
// the walk goes on inside it, so a branch and its next turns land in one
// session.
func forkID(id string, digests [][32]byte, k int) string {
	h := sha256.New()
	fmt.Fprintf(h, "contextd-fork-v2:%d:%s:%d:", len(id), id, k)
	for _, d := range digests[:min(k, len(digests))] {
		h.Write(d[:])
	}
	base, _, _ := strings.Cut(id, "~")
	if len(base) > 115 {
		base = base[:115] // ids are at most 128 bytes
	}
	return base + "~" + encodeID(h.Sum(nil))[:12]
}

func encodeID(b []byte) string {
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)[:26])
}

// resolve finds the request's session, creating it (or the session of an
// edit or rewind) when needed, and says which of the request's messages
// are new. Nothing is appended here: PrepareContext appends them.
func (g *Gateway) resolve(ctx context.Context, tenant string, d door, c *conversation, header string, noRepeat bool) (resolved, error) {
	id := header
	if id == "" {
		id = derivedID(tenant, d.name(), c)
	}
	var out resolved
	for hop := 0; ; hop++ {
		s, err := g.cfg.Engine.GetSession(ctx, tenant, id)
		if errors.Is(err, store.ErrNotFound) && readOnly(ctx) {
			// A count: the session the request would make (version 0).
			out.id, out.fresh = id, c.msgs
			return out, nil
		}
		if errors.Is(err, store.ErrNotFound) {
			created, made, err := g.create(ctx, tenant, id, d, c)
			if err != nil {
				return resolved{}, err
			}
			out.id, out.created, out.fresh, out.made, out.version = id, created, c.msgs, made, 1
			if out.history == "" {
				out.history = historyNew
			}
			return out, nil
		}
		if err != nil {
			return resolved{}, err
		}
		log, replies, closed, err := g.digests.get(ctx, g.cfg.Engine, tenant, s.Session)
		if err != nil {
			return resolved{}, err
		}
		k := 0
		for k < len(log) && k < len(c.digests) && log[k] == c.digests[k] {
			k++
		}
		cut := false
		if k == len(log) {
			// A result for a call contextd closed as interrupted (the
			// session was cleared or went on without it) cannot join
			// this session: the request goes on in one of its own from
			// there.
			for j := k; j < len(c.msgs); j++ {
				if id := resultOf(&c.msgs[j]); id != "" && closed[id] {
					k, cut = j, true
					break
				}
			}
		}
		repeat := !noRepeat && k == len(c.digests) && k < len(log) && !slices.Contains(replies[k:], false)
		extends := k == len(log) && !cut
		if repeat || extends {
			// The request's session: only now may it follow the
			// request's model, system prompt and tools.
			if readOnly(ctx) {
				// A count changes nothing.
			} else if moved, err := g.follow(ctx, tenant, s.Session, c); err != nil {
				return resolved{}, err
			} else if moved != nil {
				s.Session = *moved
			}
			out.id, out.created, out.version = id, s.CreatedAt, s.Version
		}
		if repeat {
			out.history, out.from = historyRepeated, ""
			out.repeat, out.repeatD = len(log)-k, log[k:]
			return out, nil
		}
		if extends {
			// An existing session (a branch's, too) that the request
			// extends: the header says what happened in it.
			out.fresh, out.from = c.msgs[k:], ""
			out.history = historyUnchanged
			if len(out.fresh) > 0 {
				out.history = historyExtended
			}
			return out, nil
		}
		if hop == maxForkHops {
			return resolved{}, fmt.Errorf("the conversation was edited or rewound more than %d times from session %q; send %s to name a session: %w",
				maxForkHops, id, HeaderSession, engine.ErrFailedPrecondition)
		}
		// The request no longer extends this session's log: it goes on in
		// a session of its own, never into this one.
		if out.history == "" {
			switch {
			case k == len(c.digests):
				out.history = historyRewound
			case k == len(c.digests)-1:
				out.history = historyEdited
			default:
				out.history = historyForked
			}
			out.from = id
		}
		id = forkID(id, c.digests, k)
	}
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
// returns its creation time and whether this call made it (false: a
// concurrent first request did, and only that request may unmake it).
func (g *Gateway) create(ctx context.Context, tenant, id string, d door, c *conversation) (time.Time, bool, error) {
	v, err := g.cfg.Engine.CreateSession(ctx, tenant, engine.NewSession{
		ID: id, Model: c.model, System: c.system, Tools: c.tools,
		Labels: map[string]string{SessionLabel: d.name()},
	})
	if errors.Is(err, store.ErrAlreadyExists) {
		// A concurrent first request created it: the same session.
		v, err = g.cfg.Engine.GetSession(ctx, tenant, id)
		return v.CreatedAt, false, err
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

// logCache keeps the digests of sessions' logs. The log is append-only, so
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
	replies []bool // digests[i] is a reply the gateway recorded
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
func (lc *logCache) get(ctx context.Context, e *engine.Engine, tenant string, s store.Session) ([][32]byte, []bool, map[string]bool, error) {
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
			return nil, nil, nil, err
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
			ent.digests = append(ent.digests, storedDigest(m))
			ent.replies = append(ent.replies, m.Metadata[metaReply] != "")
			added++
		}
	}
	out := ent.digests[:len(ent.digests):len(ent.digests)]
	replies := ent.replies[:len(ent.replies):len(ent.replies)]
	closed := maps.Clone(ent.closed)
	lc.mu.Lock()
	lc.held += added
	lc.mu.Unlock()
	return out, replies, closed, nil
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
		ent.digests = append(ent.digests, storedDigest(&msgs[i]))
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
