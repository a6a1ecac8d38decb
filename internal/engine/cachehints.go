package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/tokens"
)

// BreakpointKind says what a recommended cache mark closes.
type BreakpointKind int

// Breakpoint kinds, in request order.
const (
	BreakpointSystem       BreakpointKind = iota + 1 // after tools and system prompt
	BreakpointSummary                                // the end of the compaction summary
	BreakpointStablePrefix                           // the end of what the previous answer shares
	BreakpointRequestEnd                             // the end of the request
)

// MaxBreakpoints is Anthropic's limit of cache_control marks per request.
const MaxBreakpoints = 4

// Breakpoint is one recommended cache mark: on the last block of
// Messages[Index] (-1: the system prompt).
type Breakpoint struct {
	Kind         BreakpointKind
	Index        int64
	PrefixTokens int64 // request tokens up to and including the mark
}

// CacheHints say how much of a PrepareContext answer a prefix cache can
// serve from the session's previous answer, and where to put cache marks.
type CacheHints struct {
	HasPrevious    bool
	FixedStable    bool  // model, system prompt and tools unchanged
	StableMessages int64 // leading messages identical to the previous answer's
	StableTokens   int64 // fixed part + stable messages (0 unless FixedStable)
	RequestTokens  int64
	// CompactionChangedFrom is the index of the first message this call's
	// compaction changed; -1 when it did not compact.
	CompactionChangedFrom int64
	Breakpoints           []Breakpoint
}

// fixedDigest identifies what precedes the messages of every request: the
// model, the system prompt and the tool definitions.
// Memoized by fixedDigestOf (fixeddigest.go).
func fixedDigest(s store.Session) string {
	return fixedDigestOf(s.Model, s.SystemPrompt, effectiveTools(s.Tools, s.Policy))
}

// computeFixedDigest is fixedDigest of its parts, computed.
func computeFixedDigest(model, systemPrompt string, effective []chat.Tool) string {
	tools, _ := json.Marshal(effective)
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s\x00%d:%s\x00", len(model), model, len(systemPrompt), systemPrompt)
	h.Write(tools)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// cacheHints compares the view PrepareContext is about to return with the
// one the session's previous PrepareContext returned, and records this one
// as the previous answer for the next call. The session row lock serializes
// it across replicas, so "previous" is the answer recorded just before.
// Its cost is one small row: runs of consecutive log messages are stored as
// ranges (store.EncodeIDRuns).
//
// The row is written only when it changes, and only by the answer of the
// session's current version: an answer overtaken by a newer write never
// overwrites what a newer answer may have recorded.
func (e *Engine) cacheHints(ctx context.Context, tenant, id string, version int64, msgs []chat.Message, token string, changedFrom int64, before *hintsRow) (CacheHints, error) {
	var h CacheHints
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		s, err := lockedSession(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		h, _, err = e.hintsInTx(ctx, tx, &s, s.Version <= version, msgs, token, changedFrom, before)
		return err
	})
	if err != nil {
		return CacheHints{}, err
	}
	return h, nil
}

// hintsRow is the previous answer's row as a call found it, before its
// own transaction replaced it.
type hintsRow struct {
	view  store.PreparedView
	found bool
}

// hintsInTx computes the hints of msgs (a view of session s, locked by
// the caller's transaction, returned with token) against the previous
// answer's row, and, when record is set, writes this answer's row if it
// changed. PrepareContext calls it inside its append's transaction
// (preparedHints), so a growing conversation's call commits once. before,
// when set, is the previous answer's row as the call's own transaction
// found it (that transaction has since replaced it with a view the answer
// did not send); it returns the row it compared with.
func (e *Engine) hintsInTx(ctx context.Context, tx store.Tx, s *store.Session, record bool, msgs []chat.Message, token string, changedFrom int64, before *hintsRow) (CacheHints, hintsRow, error) {
	var h CacheHints
	fixed := fixedDigest(*s)
	var prev hintsRow
	if before != nil {
		prev = *before
	} else {
		v, err := tx.GetPreparedView(ctx, s.Tenant, s.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return CacheHints{}, prev, err
		default:
			prev = hintsRow{view: v, found: true}
		}
	}
	if prev.found {
		h.HasPrevious = true
		h.FixedStable = prev.view.Fixed == fixed
	}
	m, _ := e.models.Lookup(s.Model)
	h.fill(s.SystemTokens+s.ToolsTokens, int64(tokens.FramingOf(m).ReplyPriming), msgs, prev.view.IDs, changedFrom)
	ids := idsOf(msgs)
	// With before, the stored row is the call's own: written again.
	if !record || (before == nil && prev.found && prev.view.Fixed == fixed && prev.view.ViewToken == token && equalIDs(prev.view.IDs, ids)) {
		return h, prev, nil
	}
	return h, prev, tx.PutPreparedView(ctx, s.Tenant, s.ID, store.PreparedView{Fixed: fixed, IDs: ids, ViewToken: token})
}

// preparedHints are cache hints computed inside the transaction that wrote
// the view they describe: valid for the answer when it returns that view
// (the same version and view token), else computed again after the commit.
type preparedHints struct {
	hints   CacheHints
	version int64
	token   string
	// before is the previous answer's row the hints compared with: hints
	// computed again compare with it too, not with the row the
	// transaction wrote for a view the answer does not send.
	before hintsRow
}

// lastViewOrd is the ordinal of the last message of s's active view: every
// write hands the view's ordinals out in order (ViewSeq) and a rewrite
// numbers them 1..n, so it is ViewSeq unless the view is empty. The answer
// checks it against the ordinals it read (the token must be equal).
func lastViewOrd(s *store.Session) int64 {
	if s.ActiveCount == 0 {
		return 0
	}
	return s.ViewSeq
}

// fill computes the hints of msgs against the previous answer's ids, with
// fixed tokens (system prompt and tools) before the messages.
func (h *CacheHints) fill(fixed, priming int64, msgs []chat.Message, prev []string, changedFrom int64) {
	h.CompactionChangedFrom = changedFrom
	if h.FixedStable {
		for h.StableMessages < int64(min(len(msgs), len(prev))) && msgs[h.StableMessages].ID == prev[h.StableMessages] {
			h.StableMessages++
		}
	}
	prefix := make([]int64, len(msgs)+1) // prefix[i]: request tokens before msgs[i]
	prefix[0] = fixed
	for i := range msgs {
		prefix[i+1] = prefix[i] + msgs[i].Tokens
	}
	h.RequestTokens = prefix[len(msgs)] + priming
	if h.FixedStable {
		h.StableTokens = prefix[h.StableMessages]
	}
	add := func(k BreakpointKind, i int64) {
		for _, b := range h.Breakpoints {
			if b.Index == i {
				return
			}
		}
		h.Breakpoints = append(h.Breakpoints, Breakpoint{Kind: k, Index: i, PrefixTokens: prefix[i+1]})
	}
	if fixed > 0 {
		h.Breakpoints = append(h.Breakpoints, Breakpoint{Kind: BreakpointSystem, Index: -1, PrefixTokens: fixed})
	}
	summary := int64(-1)
	for i := range msgs {
		if msgs[i].Kind == chat.KindSummary {
			summary = int64(i)
		}
	}
	if summary >= 0 {
		add(BreakpointSummary, summary)
	}
	if h.StableMessages > 0 {
		add(BreakpointStablePrefix, h.StableMessages-1)
	}
	if len(msgs) > 0 {
		add(BreakpointRequestEnd, int64(len(msgs)-1))
	}
	// Marks are sorted by construction except a stable prefix that ends
	// before the summary; keep request order.
	for i := 1; i < len(h.Breakpoints); i++ {
		for j := i; j > 0 && h.Breakpoints[j].Index < h.Breakpoints[j-1].Index; j-- {
			h.Breakpoints[j], h.Breakpoints[j-1] = h.Breakpoints[j-1], h.Breakpoints[j]
		}
	}
	if len(h.Breakpoints) > MaxBreakpoints {
		h.Breakpoints = h.Breakpoints[:MaxBreakpoints]
	}
}

// firstChange is the index of the first id where a compaction's view after
// differs from its view before.
func firstChange(before, after []string) int64 {
	i := 0
	for i < min(len(before), len(after)) && before[i] == after[i] {
		i++
	}
	return int64(i)
}

// finishPrepare adds what PrepareContext returns besides the view: the
// cache hints and the session's ledger. It runs after the append (and any
// compaction) committed, so it is best effort: a failure is logged and
// returned as a warning on the committed answer, never as the call's error
// (the caller would retry an append that is already stored).
//
// Hints computed in the append's transaction (pre) serve when the answer is
// the view that transaction wrote; otherwise they take a transaction of
// their own.
func (e *Engine) finishPrepare(ctx context.Context, tenant, id string, res *PrepareResult, pre *preparedHints, noLedger bool) {
	if pre != nil && pre.version == res.Status.Version && pre.token == res.ViewToken {
		res.Cache = pre.hints
	} else {
		changedFrom := int64(-1)
		if c := res.Status.LastCompaction; res.Status.Compacted && c != nil {
			changedFrom = firstChange(c.ViewBefore, c.ViewAfter)
		}
		var before *hintsRow
		if pre != nil {
			before = &pre.before
		}
		hints, err := e.cacheHints(ctx, tenant, id, res.Status.Version, res.view, res.ViewToken, changedFrom, before)
		if err != nil {
			e.log.WarnContext(ctx, "prepare: cache hints", "tenant", tenant, "session", id, "err", err)
			res.Status.Warnings = append(res.Status.Warnings, "cache hints unavailable: "+err.Error())
		}
		res.Cache = hints
	}
	if noLedger {
		return
	}
	l, err := e.store.GetLedger(ctx, tenant, id)
	if err != nil {
		e.log.WarnContext(ctx, "prepare: ledger", "tenant", tenant, "session", id, "err", err)
		res.Status.Warnings = append(res.Status.Warnings, "ledger unavailable: "+err.Error())
		return
	}
	res.Status.Ledger = &l
}
