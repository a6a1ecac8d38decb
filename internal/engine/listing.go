package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

type sessionToken struct {
	At int64  `json:"t"`
	ID string `json:"i"`
}

// ListSessions returns a page of session summaries, newest first, and the
// next token. A row carries no system prompt and no tools (their token
// counts are in its usage), but its newest compaction, its ledger and its
// warnings, so a row's size does not grow with the session. A page ends at
// page.Size rows or at MaxResponseBytes, whichever comes first (always at
// least one row); the store reads at most page.Size+1 light rows.
func (e *Engine) ListSessions(ctx context.Context, tenant string, labels map[string]string, page Page) ([]SessionView, string, error) {
	size := page.size(50)
	f := store.ListFilter{Labels: labels, Limit: size + 1}
	if page.Token != "" {
		var tok sessionToken
		raw, err := base64.RawURLEncoding.DecodeString(page.Token)
		if err != nil || json.Unmarshal(raw, &tok) != nil || tok.ID == "" {
			return nil, "", chat.Invalid("page_token", "is not a token this server issued")
		}
		f.Before = &store.SessionCursor{CreatedAt: time.Unix(0, tok.At).UTC(), ID: tok.ID}
	}
	rows, err := e.store.ListSessions(ctx, tenant, f)
	if err != nil {
		return nil, "", err
	}
	n := min(size, len(rows))
	if limit := e.limits.MaxResponseBytes; limit > 0 {
		total := 0
		for i := range n {
			if total += summaryBytes(&rows[i]); total > limit && i > 0 {
				n = i
				break
			}
		}
	}
	next := ""
	if n < len(rows) {
		last := rows[n-1]
		raw, _ := json.Marshal(sessionToken{At: last.CreatedAt.UnixNano(), ID: last.ID})
		next = base64.RawURLEncoding.EncodeToString(raw)
	}
	out := make([]SessionView, n)
	cals := map[string]*store.Calibration{}
	for i := range out {
		if out[i], err = e.summaryView(ctx, &rows[i], cals); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

// summaryView is a listing row with its usage, ledger, newest compaction
// and warnings.
func (e *Engine) summaryView(ctx context.Context, r *store.SessionSummary, cals map[string]*store.Calibration) (SessionView, error) {
	v, err := e.viewCached(ctx, r.Session, cals)
	if err != nil {
		return v, err
	}
	l := r.Ledger
	v.Ledger, v.LastCompaction = &l, r.LastCompaction
	v.Warnings = sessionWarnings(v)
	return v, nil
}

// sessionSummary reads one session's summary row (no system prompt or
// tools, the compaction without items or views).
func (e *Engine) sessionSummary(ctx context.Context, tenant, id string) (SessionView, error) {
	rows, err := e.store.ListSessions(ctx, tenant, store.ListFilter{ID: id, Limit: 1})
	if err != nil {
		return SessionView{}, err
	}
	if len(rows) == 0 {
		return SessionView{}, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return e.summaryView(ctx, &rows[0], nil)
}

// Status is a listing row as a watcher's status at a time: usage, ledger,
// newest compaction, and the paused warning (usage warnings travel in the
// usage).
func (v SessionView) Status(at time.Time) Status {
	st := Status{SessionID: v.ID, Version: v.Version, Usage: v.Usage, Time: at, Ledger: v.Ledger, LastCompaction: v.LastCompaction, LogCount: v.LogCount, Created: v.CreatedAt}
	if pausedNow(&v.Session) {
		st.Warnings = append(st.Warnings, pausedWarning(&v.Session))
	}
	return st
}

// pausedWarning says that auto-compaction waits for the conversation to
// grow, and by how much.
func pausedWarning(s *store.Session) string {
	// A revert pauses until the next append (the user undid a compaction:
	// do not redo it at once); a compaction that saved too little pauses
	// for 5 % of the usable window.
	if n := s.AutoPausedBelow - s.ActiveTokens; n > 1 {
		return fmt.Sprintf("auto-compaction is paused for this session until it grows by %s tokens: the last compaction saved too little", thousands(n))
	}
	return "auto-compaction is paused for this session until its next append: a compaction was just reverted"
}

// pausedNow reports whether auto-compaction is paused for s.
func pausedNow(s *store.Session) bool {
	return s.AutoPausedBelow > 0 && s.ActiveTokens < s.AutoPausedBelow
}

// sessionWarnings are the usage's warnings and the session's standing
// conditions: over the usable window (the next request would not fit; what
// auto-compaction failed to prevent, or what a session with auto_compact
// off was left at), auto-compaction paused.
func sessionWarnings(v SessionView) []string {
	out := append([]string(nil), v.Usage.Warnings...)
	if v.Usage.Over > 0 {
		out = append(out, v.Usage.Recommendation)
	}
	if pausedNow(&v.Session) {
		out = append(out, pausedWarning(&v.Session))
	}
	return out
}

// summaryBytes estimates a listing row's encoded size: its ids, model,
// labels and policy, plus a fixed allowance for the usage, ledger,
// compaction record, warnings and timestamps.
func summaryBytes(r *store.SessionSummary) int {
	n := 1024 + len(r.ID) + 2*len(r.Model) // the model also in a warning
	for k, v := range r.Labels {
		n += len(k) + len(v) + 8
	}
	if p := r.Policy.Summarizer; p != nil {
		n += len(*p)
	}
	if c := r.LastCompaction; c != nil {
		n += len(c.ID)
		for _, t := range c.Tiers {
			n += len(t) + 2
		}
	}
	return n
}
