package gateway

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// Picks: the gateway's own last reply is the client's to pick or merge.
// An Anthropic client that prefilled the reply (its request ended with an
// assistant message, "{" or "Sure, here") sends back the prefill and the
// continuation as one message, or the continuation alone; a Chat
// Completions client that asked for n > 1 choices keeps one of them (the
// gateway records the first). Either way the request's history differs
// from the log only in the assistant turn at the log's end, which is the
// gateway's reply (with the client's prefill before it): the request is
// the same conversation. The client's version is recorded in place of
// that turn (engine.ViewEdit.Pick, a client edit: counted exactly, the
// originals kept in the log and expandable) and the request's new
// messages are appended after it, in one transaction.
//
// The rule: when a session's log is the request's history up to place k,
// and from k on holds only an assistant turn — at most maxPickTail
// assistant messages, the last of them a reply the gateway recorded, the
// ones before it without tool calls (a prefill) — and the request has one
// assistant message at k followed by more messages, and that message is
// the turn in the client's form, it is the client's version of the turn.
// The client's form of a turn is one of: the prefill and the reply's text
// as one (concatenated, or joined by whitespace of the client's: a space,
// a newline), the reply's text alone (each compared without the
// whitespace around it and between the pieces, with the reply's tool
// calls, by id and name),
// or another choice of the answer that was recorded (metaChoices: the
// identities of the choices after the first, which the door notes on the
// reply). A client-authored message is never replaced alone (the turn
// ends with the gateway's reply); an assistant message of the client's
// own making at that place (a stranger's conversation that starts alike)
// and a user message edited are forks as before.
//
// So that later requests, which carry the client's version, match the
// log, the first message the request appends carries metaPicked: how many
// of the log's client messages before it the version stands for, and the
// version's identity. The log cache (logcache.go) reads it, so every
// replica matches the client's history from the log alone.

// maxPickTail bounds the assistant turn a pick replaces: a prefill (or a
// few, when a client splits one) and the reply.
const maxPickTail = 4

// metaPicked marks the first message appended after a pick:
// "<messages replaced>:<hex identity of the client's version>".
const metaPicked = chat.MetaGatewayPrefix + "picked"

// pick is the assistant turn at the end of a session's log that the
// request's message k stands for: the log messages' ids.
type pick struct {
	k   int
	ids []string
}

// pickOf is the pick m's request makes of m's session, or nil. It reads
// the log's last messages (at most maxPickTail) only when the match
// already says the request differs from the log just in the log's last
// assistant turn, which ends with a reply of the gateway's.
func (g *Gateway) pickOf(ctx context.Context, m *logMatch, c *conversation) (*pick, error) {
	n := len(m.log) - m.k
	if m.extends || m.repeat || n < 1 || n > maxPickTail || m.k+1 >= len(c.msgs) ||
		!m.replies[len(m.log)-1] || c.msgs[m.k].Role != chat.RoleAssistant || c.msgs[m.k+1].Role == chat.RoleAssistant {
		return nil, nil
	}
	if m.s.LogCount < int64(n) {
		return nil, nil
	}
	tail, err := g.cfg.Engine.LogTailOf(ctx, m.s, m.s.LogCount-int64(n), n) // m.s: the row the match read
	if err != nil || len(tail) != n {
		return nil, err
	}
	if !clientForm(tail, &c.msgs[m.k]) {
		return nil, nil
	}
	p := &pick{k: m.k}
	for i := range tail {
		t := &tail[i]
		last := i == n-1
		if t.Role != chat.RoleAssistant || t.Kind != "" && t.Kind != chat.KindNormal || t.Metadata[engine.InterruptedMetadata] != "" ||
			identityOf(t) != m.log[m.k+i] || (t.Metadata[metaReply] != "") != last || !last && hasToolCall(t) {
			return nil, nil
		}
		p.ids = append(p.ids, t.ID)
	}
	return p, nil
}

// joinPick joins the request to m's session as the pick m.pick: the
// request's messages after the client's version are new, and the first
// of them says what the version stands for (metaPicked). They are a copy
// of the request's: the mark is this attempt's, and an attempt after a
// version conflict that lands elsewhere (a twin took the session, the
// request starts a session of its own) must not carry it, or the log
// cache would drop the messages before it there
// (TestPickLostToATwinLeavesNoMark).
func joinPick(c *conversation, m *logMatch, res *resolved) {
	k := m.pick.k
	res.pick = m.pick
	res.fresh = slices.Clone(c.msgs[k+1:])
	historyStamp(c, res.fresh, k+1)
	setMeta(&res.fresh[0], metaPicked, strconv.Itoa(len(m.pick.ids))+":"+hex.EncodeToString(c.ids[k][:]))
	res.history = historyExtended
}

// pickedOf reads metaPicked: how many log messages before m the client's
// version stands for, and its identity.
func pickedOf(m *chat.Message) (int, [32]byte, bool) {
	var id [32]byte
	v := m.Metadata[metaPicked]
	if v == "" {
		return 0, id, false
	}
	l, h, _ := strings.Cut(v, ":")
	n, err := strconv.Atoi(l)
	b, herr := hex.DecodeString(h)
	if err != nil || herr != nil || n < 1 || n > maxPickTail || len(b) != len(id) {
		return 0, id, false
	}
	copy(id[:], b)
	return n, id, true
}

// identifyPick finds a session the request picks the last reply of: one
// whose log holds the request's history up to its shared part and then
// at most maxPickTail messages (the sessions the index holds that
// history in, at most one indexed read and, for each, one session row
// read, joinHit).
func (g *Gateway) identifyPick(ctx context.Context, tenant string, c *conversation, sig signal, shared int64, noRepeat bool, until time.Time) (resolved, bool, error) {
	k := int(shared)
	if k == 0 || k+1 >= len(c.msgs) || k > len(c.chains) || c.msgs[k].Role != chat.RoleAssistant {
		return resolved{}, false, nil
	}
	hits, err := g.cfg.Engine.FindHistory(ctx, tenant, c.chains[k-1:k], 0)
	if err != nil {
		return resolved{}, false, err
	}
	for _, h := range hits {
		if h.Head || h.Length != shared || g.busy(ctx, tenant, h.SessionID, wholeHistory(c), until) {
			continue
		}
		res, ok, err := g.joinHit(ctx, tenant, h, c, sig, noRepeat, maxPickTail)
		if err != nil {
			return resolved{}, false, err
		}
		if ok && res.pick != nil {
			return res, true, nil
		}
	}
	return resolved{}, false, nil
}

// pickEdit is the edit that records the client's version of the turn
// res picks (engine.ViewEdit.Pick, in PrepareContext's transaction), nil
// when it picks none.
func pickEdit(c *conversation, res *resolved) *engine.PickInput {
	if res.pick == nil {
		return nil
	}
	v := []chat.Message{c.msgs[res.pick.k]}
	historyStamp(c, v, res.pick.k)
	return &engine.PickInput{Replaced: res.pick.ids, Version: v[0]}
}

// metaChoices, on a recorded reply, lists the identities (hex, comma
// separated) of the other choices the same answer offered (Chat
// Completions' n > 1), at most maxChoices.
const metaChoices = chat.MetaGatewayPrefix + "choices"

// maxChoices bounds the choices noted on a reply (metaChoices): 65 bytes
// of metadata each.
const maxChoices = 16

// noteChoices notes on reply the identities of the other choices of its
// answer (others: their messages as the answer has them), so the client
// may keep one of them (clientForm).
func noteChoices(reply []chat.Message, others []json.RawMessage) {
	if len(reply) != 1 || len(others) == 0 {
		return
	}
	var ids []string
	for _, raw := range others[:min(len(others), maxChoices)] {
		if m := oaReply(raw); len(m) == 1 {
			id := identityOf(&m[0])
			ids = append(ids, hex.EncodeToString(id[:]))
		}
	}
	if len(ids) > 0 {
		setMeta(&reply[0], metaChoices, strings.Join(ids, ","))
	}
}

// clientForm reports whether v is the assistant turn tail (a prefill, if
// any, then the gateway's reply) in the client's form (see the rule
// above).
func clientForm(tail []chat.Message, v *chat.Message) bool {
	reply := &tail[len(tail)-1]
	id := identityOf(v)
	if slices.Contains(strings.Split(reply.Metadata[metaChoices], ","), hex.EncodeToString(id[:])) {
		return true
	}
	if !slices.Equal(callsOf(v), callsOf(reply)) {
		return false
	}
	t := v.Text()
	if joined(t, []string{reply.Text()}) {
		return true
	}
	if len(tail) == 1 {
		return false
	}
	pieces := make([]string, 0, len(tail))
	for i := range tail {
		pieces = append(pieces, tail[i].Text())
	}
	return joined(t, pieces)
}

// joined reports whether t is pieces in order, with nothing between them
// but whitespace (none, or a separator the client put there: prefill "Here
// is" and continuation " the answer" or "the answer", joined with a space
// or a newline), and nothing around them but whitespace. Each piece is
// matched whole, so a text the client wrote itself is not one. Work:
// linear in t.
func joined(t string, pieces []string) bool {
	t = strings.TrimSpace(t)
	for _, p := range pieces {
		p = strings.TrimSpace(p)
		if !strings.HasPrefix(t, p) {
			return false
		}
		t = strings.TrimLeftFunc(t[len(p):], unicode.IsSpace)
	}
	return t == ""
}

// callsOf is a message's tool calls, by id and name.
func callsOf(m *chat.Message) []string {
	var out []string
	for _, p := range m.Parts {
		if p.Type == chat.PartToolCall {
			out = append(out, p.ToolCall.ID+"\x00"+p.ToolCall.Name)
		}
	}
	return out
}
