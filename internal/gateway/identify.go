package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// Identify: which session a request belongs to (the second stage of the
// request path, after admit). A session is named by what the client
// already says (signal.go); without that, the conversation is looked up
// by its whole history in the tenant's history index: the session whose
// log is the longest prefix of the request's history, found by the
// rolling digest of each prefix (one indexed read for the usual request,
// which adds one or two messages to its session). Two conversations that
// differ anywhere never land in one session after their first difference;
// no session is ever shared with a stranger by its opening.

// identify is the stage (exchange.go): the client's signal (signal.go)
// and the history chains of its messages within the signal's scope. The
// session itself is matched by identify below, which prepare's conflict
// loop calls (prepare.go). A request forwarded unchanged is not
// identified.
func (x *exchange) identify() bool {
	if x.c.passthrough != "" {
		return true
	}
	sig, err := signalOf(x.tenant, x.d.name(), x.r, x.rb.fields)
	if err != nil {
		writeError(x.w, x.shape, http.StatusBadRequest, errInvalid, err.Error())
		return false
	}
	historyChains(x.d.name(), sig, x.c)
	x.sig = sig
	return true
}

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
	repeatD [][32]byte // the identities of those replies
	// tail: the request's own messages sent after them, not stored (a
	// summary request, summaryrequest.go).
	tail []chat.Message
	// own: the request goes upstream as the client sent it (tail),
	// nothing of the session's view (slimmedaside.go).
	own     bool
	history string
	// from is the session this one forked from, when the caller may know
	// it (its own signal's); named: the response may name the session (the
	// caller sent it, its signal derives it, or this request made it).
	from  string
	named bool
	fresh []chat.Message
	// shared: the log this session (made by the request) forked from and
	// how much of it the request repeats, stored once (PrepareInput.Shared).
	shared store.SharedPrefix
	// pick: the request's message at pick.k is the client's version of
	// the log's last assistant turn (picks.go).
	pick *pick
	// row is the session's row as the match read it (or as following the
	// request left it), which PrepareContext starts from
	// (engine.PrepareInput.Read); nil for a session this request made.
	row *store.Session
	// noHeads are the request's new chains when the match did not look
	// them up (lastserved.go, heldRow): the first PrepareContext checks
	// them (engine.PrepareInput.NoHeads).
	noHeads []string
}

// historyChains computes the identities and history chains of c's
// messages (identityOf, chainNext) within the scope of its signal.
// The identities come with the messages from the door (memo.go: a message
// resent is not digested again) when it has them.
func historyChains(door string, sig signal, c *conversation) {
	if len(c.ids) != len(c.msgs) {
		c.ids = make([][32]byte, len(c.msgs))
		for i := range c.msgs {
			c.ids[i] = identityOf(&c.msgs[i])
		}
	}
	c.chains = make([]string, len(c.msgs))
	prev := chainStart(door, sig.scope)
	var text [32]byte
	for i := range c.msgs {
		prev = chainNext(prev, c.ids[i])
		hex.Encode(text[:], prev[:])
		c.chains[i] = string(text[:]) // one allocation a message, each its own (caches keep some)
	}
}

// chainStart is the chain of an empty history: the door and the signal's
// scope, so conversations of other doors or other signals never meet.
func chainStart(door, scope string) [16]byte {
	h := sha256.New()
	for _, s := range []string{"contextd-history-v1", door, scope} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

// chainNext chains a message's identity onto its prefix's chain.
func chainNext(prev [16]byte, id [32]byte) [16]byte {
	var in [48]byte // on the stack: no allocation a message
	copy(in[:16], prev[:])
	copy(in[16:], id[:])
	sum := sha256.Sum256(in[:])
	return [16]byte(sum[:16])
}

// identityOf identifies a message by what a client keeps stable when it
// resends it, so a benign re-serialization is the same message:
//   - a user message of text by what the person wrote (chat.StripScaffolding
//     of each text part): clients move their injected blocks between user
//     messages (Qwen Code's date <system-reminder> leaves the first user
//     message on --resume), and that is not another conversation; a user
//     message that is all scaffolding (an agent framework's observation)
//     or carries images, audio or files, and a system message, by its whole
//     content (digestOf: text, images', audio's and files' data; cache
//     marks do not count);
//   - an assistant message by its text (trimmed) and its tool calls' ids
//     and names: not their arguments, which clients resend with schema
//     defaults filled in or keys reordered, nor thinking or reasoning,
//     which clients drop or keep;
//   - a tool result by the call it answers: clients clear old results
//     (Qwen Code's "[Old tool result content cleared]"), and the call's id,
//     made by the provider for that call, already tells it apart.
//
// What goes upstream is still the client's own bytes (build), so nothing
// the identity leaves out is lost.
func identityOf(m *chat.Message) [32]byte {
	switch m.Role {
	case chat.RoleAssistant:
		h := sha256.New()
		w := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
		w("assistant")
		w(m.Name)
		var text []string
		for _, p := range m.Parts {
			switch p.Type {
			case chat.PartText:
				if t := strings.TrimSpace(p.Text); t != "" {
					text = append(text, t)
				}
			case chat.PartToolCall:
				w("c")
				w(p.ToolCall.ID)
				w(p.ToolCall.Name)
			}
		}
		w(strings.Join(text, "\n"))
		var d [32]byte
		h.Sum(d[:0])
		return d
	case chat.RoleTool:
		if id := resultOf(m); id != "" {
			return sha256.Sum256([]byte("tool-result:" + id))
		}
	case chat.RoleUser:
		if d, ok := authoredIdentity(m); ok {
			return d
		}
	}
	return storedDigest(m)
}

// authoredIdentity is the identity of a user message of text parts by
// what is left of them without scaffolding; false when the message has
// another part or nothing is left.
func authoredIdentity(m *chat.Message) ([32]byte, bool) {
	var text []string
	for _, p := range m.Parts {
		if p.Type != chat.PartText {
			return [32]byte{}, false
		}
		if t := strings.TrimSpace(chat.StripScaffolding(p.Text)); t != "" {
			text = append(text, t)
		}
	}
	if len(text) == 0 {
		return [32]byte{}, false
	}
	h := sha256.New()
	for _, s := range []string{"user-authored", m.Name, strings.Join(text, "\n")} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	var d [32]byte
	h.Sum(d[:0])
	return d, true
}

// historyStamp records on fresh (the request's messages from index k on)
// their place in the history, so the append indexes them.
// Each gets parts and metadata of its own first: the door's memo shares
// them with every request that resends the message.
func historyStamp(c *conversation, fresh []chat.Message, k int) {
	for i := range fresh {
		fresh[i].Parts, fresh[i].Metadata = slices.Clone(fresh[i].Parts), maps.Clone(fresh[i].Metadata)
		setMeta(&fresh[i], store.HistoryMetadata, strconv.Itoa(k+i+1)+":"+c.chains[k+i])
	}
}

// replyStamp records on a reply its place after the request's history,
// and returns the chain of its last message (the history a request that
// carries the reply has).
func replyStamp(c *conversation, reply []chat.Message) string {
	n := len(c.msgs)
	var prev [16]byte
	if n == 0 || len(c.chains) != n {
		return ""
	}
	b, _ := hex.DecodeString(c.chains[n-1])
	copy(prev[:], b)
	last := ""
	for i := range reply {
		prev = chainNext(prev, identityOf(&reply[i]))
		last = hex.EncodeToString(prev[:])
		setMeta(&reply[i], store.HistoryMetadata, strconv.Itoa(n+i+1)+":"+last)
	}
	return last
}

// maxRepeatTail bounds the log messages after a request's history that a
// session answering it as a repeat may hold (its replies, and results
// contextd closed): a request checks at most 64 sessions for a repeat,
// each one row and at most its history and this many messages read.
const maxRepeatTail = 16

// maxHeadProbe is how many of a request's last histories the first read
// of the index checks (a request usually adds one or two messages, or a
// few tool results, to its session).
const maxHeadProbe = 8

// candidates finds sessions whose log may be a prefix of c's history: the
// heads of the index among c's chains, longest first. The last chains are
// read first; the rest, only when none of them is a head. shared is the
// longest of c's histories any session holds (a fork's shared prefix).
// base is a session holding the longest of those prefixes (shared).
func (g *Gateway) candidates(ctx context.Context, tenant string, c *conversation) (heads []store.HistoryHit, shared int64, base string, err error) {
	n := len(c.chains)
	for end := n; end > 0; {
		start := max(0, end-maxHeadProbe)
		if end < n {
			start = max(0, end-500)
		}
		hits, err := g.cfg.Engine.FindHistory(ctx, tenant, c.chains[start:end], 0)
		if err != nil {
			return nil, 0, "", err
		}
		for _, h := range hits {
			if h.Length > shared {
				shared, base = h.Length, h.SessionID
			}
		}
		if len(hits) > 0 && hits[0].Head {
			return hits, shared, base, nil
		}
		end = start
	}
	return nil, shared, base, nil
}

// headsOf is the sessions of hits' longest head.
func headsOf(hits []store.HistoryHit) []string {
	var out []string
	for _, h := range hits {
		if h.Head && h.Length == hits[0].Length {
			out = append(out, h.SessionID)
		}
	}
	return out
}

// repeats finds sessions holding c's whole history, not as their head:
// the request may be one answered before (repeated).
func (g *Gateway) repeats(ctx context.Context, tenant string, c *conversation) ([]store.HistoryHit, error) {
	if len(c.chains) == 0 {
		return nil, nil
	}
	return g.cfg.Engine.FindHistory(ctx, tenant, c.chains[len(c.chains)-1:], 0)
}

// busy reports whether a session has a call upstream: a request never
// lands in (nor waits for) a session whose call is still out, so none
// waits for another conversation's upstream call. A session whose answer
// is out and being recorded is waited for (a few writes), so a request
// finds it as its next request will. So is a call whose whole history is
// the request's (twin, its chain; "" for none): the request's twin (a
// client's retry racing it, or the same request sent twice at once),
// after whose recorded answer the request is a repeat of the session,
// where before it went on in a session of its own
// (TestConcurrentRetriesOfAnExtension). All the waits of one request end
// by until (maxRecordWait past its body: waitsUntil), however many
// sessions it checks and however many times prepare's conflict loop runs
// identify again: sessions of the same history may be strangers'.
func (g *Gateway) busy(ctx context.Context, tenant, id, twin string, until time.Time) bool {
	g.waitRecorded(ctx, tenant, id, until)
	for {
		v, ok := g.inflight.Load(sessionKey(tenant, id))
		if !ok {
			return false
		}
		h := v.(*hold)
		// A call whose client went away (a client that gave up on a
		// hanging provider, and retries) appends nothing more unless it
		// claimed its reply (hold.claimReply, decided with free under one
		// lock), so the session is not kept from the client's retry,
		// which would otherwise go on in a copy of the session while the
		// call unwinds (TestBusyFreesAbandonedCalls).
		if h.free() {
			return false
		}
		if twin == "" || h.history != twin || !waitHold(ctx, h, until) {
			return true
		}
	}
}

// identify finds the request's session, creating it when needed, and
// says which of the request's messages are new. Nothing is appended here:
// PrepareContext appends them (prepare).
// Its waits (for a reply it carries, for a twin's call) end by until, the
// request's one deadline for them (waitsUntil), not a bound of each call.
func (g *Gateway) identify(ctx context.Context, tenant string, d door, c *conversation, sig signal, noRepeat bool, until time.Time) (resolved, error) {
	// Each match its own places: the session matched again (prepare's
	// loop) may be another (one made after this one was closed), whose
	// messages have the same ids at the same positions (assent.go).
	c.sent = sentPlaces{}
	if !g.awaitReply(ctx, tenant, c, until) {
		return resolved{}, ctx.Err()
	}
	// The session this replica last served the request's history in.
	if res, ok, err := g.identifyServed(ctx, tenant, c, sig, noRepeat, until); err != nil || ok {
		return res, err
	}
	// The session whose log is the longest prefix of the request.
	hits, shared, base, err := g.candidates(ctx, tenant, c)
	if err != nil {
		return resolved{}, err
	}
	left := false // the request left the signal's session
	// Sessions whose logs are the same history cannot be told apart: a
	// random one, so that conversations that start alike spread over them
	// rather than all race for the first.
	heads := headsOf(hits)
	mrand.Shuffle(len(heads), func(i, j int) { heads[i], heads[j] = heads[j], heads[i] })
	for _, id := range heads {
		if g.busy(ctx, tenant, id, wholeHistory(c), until) {
			continue
		}
		if res, ok, _, err := g.tryJoin(ctx, tenant, id, c, sig, noRepeat); err != nil || ok {
			return res, hideSession(err, resolved{id: id, named: sig.owns(id)})
		}
	}
	// The signal's own session (also one made through the API, whose
	// messages the index does not hold).
	if sig.id != "" {
		res, ok, m, err := g.tryJoin(ctx, tenant, sig.id, c, sig, noRepeat)
		if err != nil || ok {
			return res, err
		}
		if m == nil {
			return g.make(ctx, tenant, sig.id, d, c, sig, historyNew)
		}
		if res, ok, err := g.compacted(ctx, tenant, sig.id, c, sig, m); err != nil || ok {
			return res, err
		}
		if res, ok := aside(sig.id, c, sig, m); ok {
			return res, nil
		}
		if int64(m.k) > shared {
			shared, base = int64(m.k), sig.id
		}
		left = true
	}
	// The client's version of a session's last reply (picks.go).
	if res, ok, err := g.identifyPick(ctx, tenant, c, sig, shared, noRepeat, until); err != nil || ok {
		return res, err
	}
	// A request answered before, again.
	if !noRepeat {
		reps, err := g.repeats(ctx, tenant, c)
		if err != nil {
			return resolved{}, err
		}
		for _, h := range reps {
			if h.Head || g.busy(ctx, tenant, h.SessionID, wholeHistory(c), until) {
				continue
			}
			// A repeat's log is the request's history and the replies it
			// got: a session whose log goes on further (a stranger that
			// shares the request's opening and went on) is not read.
			if res, ok, err := g.joinHit(ctx, tenant, h, c, sig, false, maxRepeatTail); err != nil || ok && res.repeat > 0 {
				return res, err
			}
		}
	}
	// A client's compaction of its history without a session signal
	// (unsignalled.go), after the pick and repeat lookups: those name the
	// session the request's history is in (each one indexed read), while
	// this one names a session by what the request kept of it (its calls,
	// or a remembered summary). The session a request picks or repeats
	// holds the calls the request kept (every log holds its whole client
	// history, a fork's too), so where those are one session's the match
	// says pick or repeat, which is no compaction; but a summary the
	// request starts with is remembered for the session that asked for it,
	// whichever session the request was answered in since (one that
	// session was busy for): TestRepeatBeforeTheUnsignalledLookup.
	if res, ok, err := g.unsignalledCompaction(ctx, tenant, c, sig, noRepeat, until); err != nil || ok {
		return res, err
	}
	// A conversation of its own. It shares a prefix with a session when
	// the index holds one of its histories: a fork.
	how := historyNew
	if n := int64(len(c.msgs)); shared > 0 || left {
		switch {
		case shared >= n:
			how = historyRewound
		case shared == n-1:
			how = historyEdited
		default:
			how = historyForked
		}
	}
	id := "gw-" + randomID()
	if sig.id != "" {
		if id, err = g.freeFork(ctx, tenant, sig.id, c, noRepeat); err != nil {
			return resolved{}, err
		}
	}
	res, err := g.make(ctx, tenant, id, d, c, sig, how)
	if err == nil && sig.id != "" && how != historyNew {
		res.from = sig.id
	}
	if err == nil && res.made && how != historyNew {
		res.shared = store.SharedPrefix{SessionID: base, Length: shared}
	}
	return res, err
}

// logMatch is how a request's history meets a session's log.
type logMatch struct {
	s       store.Session
	log     [][32]byte // the identities of the log's client messages
	replies []bool     // log[i] is a reply the gateway recorded
	// restart: how many of the log's first messages the client's latest
	// compaction of its history appended (0: the log never restarted).
	restart int
	k       int  // the request's first k messages are the log's first k
	extends bool // the log is a prefix of the request's history
	repeat  bool // the request is the log but for its last replies
	// noRepeat: the request may not be answered from a prefix of the
	// session's view (it was tried: the replies were not the view's tail).
	noRepeat bool
	pick     *pick // the request picks the log's last reply (picks.go)
}

// match reads session id (nil when it does not exist) and matches the
// request against its log (the identities of its client messages, kept by
// logCache: one indexed read when nothing is new).
func (g *Gateway) match(ctx context.Context, tenant, id string, c *conversation, noRepeat bool) (*logMatch, error) {
	s, err := g.cfg.Engine.SessionRow(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return g.matchRow(ctx, tenant, s, c, noRepeat)
}

// matchRow is match of the session whose row is s.
func (g *Gateway) matchRow(ctx context.Context, tenant string, s store.Session, c *conversation, noRepeat bool) (*logMatch, error) {
	log, details, replies, closed, restart, err := g.digests.get(ctx, g.cfg.Engine, tenant, s)
	if err != nil {
		return nil, err
	}
	if len(c.details) != len(c.msgs) {
		c.details = detailsOf(c.msgs)
	}
	m := &logMatch{s: s, log: log, replies: replies, restart: restart, noRepeat: noRepeat}
	// The same identities and details that agree (detailOf): results of
	// calls whose ids a provider reused are not the same message.
	for m.k < len(log) && m.k < len(c.ids) && log[m.k] == c.ids[m.k] && detailsAgree(details[m.k], c.details[m.k]) {
		m.k++
	}
	m.extends = m.k == len(log)
	if m.extends {
		// A result for a call contextd closed as interrupted (the session
		// was cleared or went on without it) cannot join this session.
		for j := m.k; j < len(c.msgs); j++ {
			if id := resultOf(&c.msgs[j]); id != "" && closed[id] {
				m.extends = false
				break
			}
		}
	}
	m.repeat = !noRepeat && m.k == len(c.ids) && m.k < len(log) && !slices.Contains(replies[m.k:], false)
	if m.pick, err = g.pickOf(ctx, m, c); err != nil {
		return nil, err
	}
	return m, nil
}

// tryJoin joins the request to session id when the request extends it,
// repeats it, or is it (ok); m is how they met (nil: no such session).
func (g *Gateway) tryJoin(ctx context.Context, tenant, id string, c *conversation, sig signal, noRepeat bool) (res resolved, ok bool, m *logMatch, err error) {
	m, err = g.match(ctx, tenant, id, c, noRepeat)
	if err != nil || m == nil {
		return resolved{}, false, m, err
	}
	res, ok, err = g.join(ctx, tenant, id, c, sig, m)
	return res, ok, m, err
}

// joinHit tries to join the request to the session of h (a session whose
// log holds the request's history, or a prefix of it, up to h.Length),
// when its log holds at most tail messages more: one read of the session's
// row, and its log matched only then. Errors do not name a stranger's
// session.
func (g *Gateway) joinHit(ctx context.Context, tenant string, h store.HistoryHit, c *conversation, sig signal, noRepeat bool, tail int64) (resolved, bool, error) {
	hidden := resolved{id: h.SessionID, named: sig.owns(h.SessionID)}
	s, err := g.cfg.Engine.SessionRow(ctx, tenant, h.SessionID)
	if errors.Is(err, store.ErrNotFound) || err == nil && s.LogCount > h.Length+tail {
		return resolved{}, false, nil
	}
	if err != nil {
		return resolved{}, false, hideSession(err, hidden)
	}
	m, err := g.matchRow(ctx, tenant, s, c, noRepeat)
	if err != nil {
		return resolved{}, false, hideSession(err, hidden)
	}
	res, ok, err := g.join(ctx, tenant, h.SessionID, c, sig, m)
	return res, ok, hideSession(err, hidden)
}

// join joins the request to session id as m matched them, when the
// request extends or repeats it (ok).
func (g *Gateway) join(ctx context.Context, tenant, id string, c *conversation, sig signal, m *logMatch) (res resolved, ok bool, err error) {
	if m.repeat && len(followMask(m.s, c)) > 0 {
		// Not the same request again: a repeat never changes the session
		// it is answered from.
		m.repeat = false
	}
	if !m.extends && !m.repeat && m.pick == nil {
		return resolved{}, false, nil
	}
	if res, ok := aside(id, c, sig, m); ok { // an extension without a signal: summaryrequest.go
		return res, true, nil
	}
	res = resolved{id: id, created: m.s.CreatedAt, version: m.s.Version,
		named: sig.owns(id), row: &m.s}
	// The request's session: only now may it follow the request's model,
	// system prompt and tools.
	if moved, err := g.follow(ctx, tenant, m.s, c); err != nil {
		return resolved{}, false, err
	} else if moved != nil {
		res.version, res.created, res.row = moved.Version, moved.CreatedAt, moved
	}
	if m.repeat {
		res.history, res.repeat, res.repeatD = historyRepeated, len(m.log)-m.k, m.log[m.k:]
		return res, true, nil
	}
	if !m.extends {
		joinPick(c, m, &res)
		return res, true, nil
	}
	res.fresh = c.msgs[m.k:]
	historyStamp(c, res.fresh, m.k)
	res.history = historyUnchanged
	if len(res.fresh) > 0 {
		res.history = historyExtended
	}
	return res, true, nil
}

// landing is the session the request would land in now and how many of
// its messages that session's log holds; "" when it would start a session
// of its own. Nothing is created or changed (count_tokens).
func (g *Gateway) landing(ctx context.Context, tenant string, c *conversation, sig signal) (string, int, error) {
	hits, _, _, err := g.candidates(ctx, tenant, c)
	if err != nil {
		return "", 0, err
	}
	until := g.waitsUntil(time.Now()) // the count_tokens request's one lookup
	var ids []string
	for _, id := range headsOf(hits) {
		if !g.busy(ctx, tenant, id, "", until) {
			ids = append(ids, id)
		}
	}
	if sig.id != "" {
		ids = append(ids, sig.id)
	}
	for _, id := range ids {
		m, err := g.match(ctx, tenant, id, c, true)
		if err != nil {
			return "", 0, err
		}
		if m != nil && m.extends {
			return id, m.k, nil
		}
	}
	return "", 0, nil
}

// make creates session id for the request, all of whose messages are new.
func (g *Gateway) make(ctx context.Context, tenant, id string, d door, c *conversation, sig signal, how string) (resolved, error) {
	created, made, err := g.create(ctx, tenant, id, d, c)
	if err != nil {
		return resolved{}, err
	}
	if !made {
		// A concurrent twin of this request (the same signal and history)
		// made it first: the same session, matched as usual.
		res, ok, _, err := g.tryJoin(ctx, tenant, id, c, sig, false)
		if err != nil {
			return resolved{}, err
		}
		if !ok {
			return resolved{}, fmt.Errorf("session %q changed while this request was matched: %w", id, store.ErrVersionConflict)
		}
		return res, nil
	}
	res := resolved{id: id, created: created, made: true, named: true, version: 1, history: how, fresh: c.msgs}
	historyStamp(c, res.fresh, 0)
	return res, nil
}

// forkID names the session a signalled conversation goes on in when its
// history no longer extends the signal's session: the same request (a
// retry, another replica) names the same one.
func forkID(base string, c *conversation) string {
	h := sha256.New()
	fmt.Fprintf(h, "contextd-fork-v3:%d:%s:", len(base), base)
	if n := len(c.chains); n > 0 {
		h.Write([]byte(c.chains[n-1]))
	}
	if len(base) > 115 {
		base = base[:115] // ids are at most 128 bytes
	}
	return base + "~" + encodeID(h.Sum(nil))[:12]
}

// maxForkChain bounds the forks freeFork reads for one request: one per
// time the conversation came back to the same history and went on from
// it (a client that rewinds to the same message again and again) before
// this request. A client that compacts its history to the same history
// again stays in its session (compactsAgain) and makes none.
const maxForkChain = 64

// freeFork is the fork of base the request goes on in: forkID's, unless
// a session by that id holds a history the request neither extends nor
// repeats (the conversation came back to this very history before and
// went on from it: a client that compacted its history to the same
// summary twice). Then the request forks that fork, and so on: the same
// request (a retry, another replica) names the same session every time.
// CreateSession answers a create of an existing id with the same settings
// as made, so the id must be free or joinable before make creates it.
// Past maxForkChain forks of the same history the request goes on in a
// numbered fork (overflowFork), never refused.
func (g *Gateway) freeFork(ctx context.Context, tenant, base string, c *conversation, noRepeat bool) (string, error) {
	id := forkID(base, c)
	for range maxForkChain {
		m, err := g.match(ctx, tenant, id, c, noRepeat)
		if err != nil || m == nil || m.extends || m.repeat || m.pick != nil {
			return id, err
		}
		id = forkID(id, c)
	}
	return g.overflowFork(ctx, tenant, base, c, noRepeat)
}

// maxOverflowProbes bounds the session rows overflowFork reads: enough to
// find the first free of 2^31 numbered forks.
const maxOverflowProbes = 64

// overflowFork is the session past the fork chain the request goes on
// in: the numbered forks of base and the request's history
// (overflowID(base, c, 0), 1, 2, …) are made in order, so the first free
// number is found by a doubling and then a halving search of their rows
// (at most 2·log2(n)+2 reads for n of them); the request joins the
// latest when it extends or repeats it (a twin of the request made it:
// identical requests at once, a retry storm, land in one session, on any
// replica, whose twin's call may still be out) and takes the first free
// number otherwise. A numbered fork that ended leaves a gap the search
// may stop at: the request then goes on in it or next to it, never
// refused.
func (g *Gateway) overflowFork(ctx context.Context, tenant, base string, c *conversation, noRepeat bool) (string, error) {
	probes := 0
	taken := func(n int) (bool, error) {
		probes++
		_, err := g.cfg.Engine.SessionRow(ctx, tenant, overflowID(base, c, n))
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	lo, hi := -1, 0 // lo is taken (or -1), hi is free once the doubling stops
	for {
		ok, err := taken(hi)
		if err != nil {
			return "", err
		}
		if !ok {
			break
		}
		if probes >= maxOverflowProbes/2 {
			return base[:min(len(base), 100)] + "~r" + randomID(), nil // 2^31 forks of one history: never refused
		}
		lo, hi = hi, 2*hi+1
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := taken(mid)
		if err != nil {
			return "", err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo >= 0 {
		id := overflowID(base, c, lo)
		m, err := g.match(ctx, tenant, id, c, noRepeat)
		if err != nil {
			return "", err
		}
		if m != nil && (m.extends || m.repeat || m.pick != nil) {
			return id, nil
		}
	}
	return overflowID(base, c, hi), nil
}

// overflowID names the numbered fork n of base for the request's history
// (overflowFork): <base>~r<digest>, at most 128 bytes.
func overflowID(base string, c *conversation, n int) string {
	h := sha256.New()
	fmt.Fprintf(h, "contextd-overflow-v1:%d:%s:%d:", len(base), base, n)
	if k := len(c.chains); k > 0 {
		h.Write([]byte(c.chains[k-1]))
	}
	if len(base) > 100 {
		base = base[:100] // ids are at most 128 bytes
	}
	return base + "~r" + encodeID(h.Sum(nil))[:20]
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return encodeID(b[:])
}

// maxRecordWait bounds how long a request waits, in all, for a reply it
// carries to be recorded and for its twins' calls (each write has its own
// 30 s deadline), from when its body is in (waitsUntil).
const maxRecordWait = time.Minute

// waitsUntil is the deadline of all the waits of a request whose work
// began at from: set once, when serveDoor has its body (a slow upload
// spends none of it), so a request whose identify runs again (a version
// conflict, a session that moved) does not wait maxRecordWait more each
// time.
func (g *Gateway) waitsUntil(from time.Time) time.Time { return from.Add(maxRecordWait) }

// awaitReply waits while a reply the request carries is being recorded
// (its answer reached the client before its session's log has it), so the
// request finds it in the log, at most until until (at worst the reply
// comes from the client: matched as it is). It waits only for a reply
// this request carries, never for a stranger's call; false when the
// client went away.
func (g *Gateway) awaitReply(ctx context.Context, tenant string, c *conversation, until time.Time) bool {
	for i := len(c.chains) - 1; i >= 0; i-- {
		v, ok := g.inflight.Load(replyKey(tenant, c.chains[i]))
		if !ok {
			continue
		}
		waitHold(ctx, v.(*hold), until)
		return ctx.Err() == nil
	}
	return true
}
