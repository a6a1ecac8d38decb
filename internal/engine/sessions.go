package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/tokens"
	"github.com/contextd/contextd/internal/watch"
)

// ErrFailedPrecondition is a request refused in the session's current state
// (for example an idempotency key reused for another request).
var ErrFailedPrecondition = errors.New("failed precondition")

// SessionView is a session with its current usage.
type SessionView struct {
	store.Session
	Usage Usage
	// Ledger is what the session has cost (GetSession and listings read
	// it; nil elsewhere).
	Ledger *store.Ledger
	// LastCompaction is the newest compaction's short record (GetSession
	// and listings; nil when there is none or it was not read).
	LastCompaction *store.Compaction
	// Warnings are what a person should know about the session now: the
	// usage's warnings (an unknown model) and standing conditions
	// (auto-compaction paused).
	Warnings []string
}

// NewSession is a CreateSession request.
type NewSession struct {
	ID     string
	Model  string
	System string
	Tools  []chat.Tool
	Policy compaction.Overrides
	Labels map[string]string
}

// timestamp is now, at the precision both stores keep (microseconds).
func (e *Engine) timestamp() time.Time { return e.now().UTC().Truncate(time.Microsecond) }

func newSessionID() string {
	var b [15]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "ses_" + strings.ToLower(base32.StdEncoding.EncodeToString(b[:]))
}

// encodingError wraps a failure to load an encoding: a vocabulary that is
// not imported is a precondition the operator can fix (the message names the
// import command).
func encodingError(name string, err error) error {
	if errors.Is(err, tokens.ErrVocabMissing) {
		return fmt.Errorf("encoding %s: %w: %w", name, err, ErrFailedPrecondition)
	}
	return fmt.Errorf("encoding %s: %w", name, err)
}

// modelFor resolves a session's model and its encoding.
func (e *Engine) modelFor(name string) (tokens.Model, bool, *tokens.Encoding, error) {
	m, known := e.models.Lookup(name)
	enc, err := e.encodings.Get(m.Encoding)
	if err != nil {
		return m, known, nil, encodingError(m.Encoding, err)
	}
	return m, known, enc, nil
}

// CreateSession stores a new session.
func (e *Engine) CreateSession(ctx context.Context, tenant string, in NewSession) (SessionView, error) {
	if err := chat.ValidateTools("tools", in.Tools); err != nil {
		return SessionView{}, err
	}
	if err := checkExpandToolName(in.Tools, in.Policy); err != nil {
		return SessionView{}, err
	}
	m, _, enc, err := e.modelFor(in.Model)
	if err != nil {
		return SessionView{}, err
	}
	if _, err := compaction.Resolve("policy", in.Policy, m.ContextWindow); err != nil {
		return SessionView{}, err
	}
	if in.Policy.Summarizer != nil {
		if _, _, err := e.summarizers.Resolve(*in.Policy.Summarizer); err != nil {
			return SessionView{}, chat.Invalid("policy.summarizer", "%v", err)
		}
	}
	fr := tokens.FramingOf(m)
	tools := effectiveTools(in.Tools, in.Policy)
	release, err := e.admitCount(ctx, fr, "", in.System, tools, nil)
	if err != nil {
		return SessionView{}, err
	}
	defer release() // also on a panic; released early below (once)
	toolsTokens, _ := tokens.CountTools(enc, fr, in.System, tools)
	systemTokens := tokens.CountSystem(enc, fr, in.System)
	release()
	now := e.timestamp()
	s := store.Session{
		Tenant: tenant, ID: in.ID, Model: in.Model, SystemPrompt: in.System, Tools: in.Tools,
		Policy: in.Policy, Labels: in.Labels, Version: 1,
		SystemTokens: systemTokens, ToolsTokens: toolsTokens,
		CreatedAt: now, UpdatedAt: now,
	}
	if s.ID == "" {
		s.ID = newSessionID()
	}
	err = e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		if max := e.limits.MaxSessionsPerTenant; max > 0 {
			n, err := tx.CountSessions(ctx, tenant)
			if err != nil {
				return err
			}
			if n >= max {
				return fmt.Errorf("tenant %q already has %d live sessions, the most %s allows; delete some first (or raise the setting): %w: %w",
					tenant, n, limitSessions, ErrSessionLimit, ErrResourceExhausted)
			}
		}
		return tx.InsertSession(ctx, &s)
	})
	if errors.Is(err, store.ErrAlreadyExists) {
		// A retried create (its first answer lost) finds the session it
		// made: the same settings answer it, others are AlreadyExists.
		if prev, rerr := e.readSession(ctx, tenant, s.ID); rerr == nil && sameCreate(prev, s) {
			return e.view(ctx, prev)
		}
	}
	if err != nil {
		return SessionView{}, err
	}
	e.notify(ctx, tenant, s.ID, s.Version, watch.EventUpdated)
	// Committed: the usage reads only the model's calibration; failing
	// that, the answer has none rather than an error (a retry now finds
	// the session above).
	v, err := e.view(ctx, s)
	if err != nil {
		e.log.WarnContext(ctx, "create: usage", "tenant", tenant, "session", s.ID, "err", err)
		return SessionView{Session: s, Usage: Usage{Model: s.Model, Warnings: []string{"usage unavailable: " + err.Error()}}}, nil
	}
	return v, nil
}

// sameCreate reports whether a stored session has the settings a create
// asks for (model, system prompt, tools, policy, labels).
func sameCreate(stored, asked store.Session) bool {
	settings := func(s store.Session) string {
		if len(s.Tools) == 0 {
			s.Tools = nil
		}
		if len(s.Labels) == 0 {
			s.Labels = nil
		}
		b, _ := json.Marshal([]any{s.Model, s.SystemPrompt, s.Tools, s.Policy, s.Labels})
		return string(b)
	}
	return settings(stored) == settings(asked)
}

// view attaches usage, computed from the stored aggregates (no scan, no
// tokenizing), the session's anchor and the model's calibration.
func (e *Engine) view(ctx context.Context, s store.Session) (SessionView, error) {
	return e.viewCached(ctx, s, nil)
}

// viewCached is view with a per-call cache of calibrations by model, so a
// listing reads each model's calibration once.
func (e *Engine) viewCached(ctx context.Context, s store.Session, cals map[string]*store.Calibration) (SessionView, error) {
	m, known := e.models.Lookup(s.Model)
	p, err := compaction.Resolve("policy", s.Policy, m.ContextWindow)
	if err != nil {
		// A stored policy that no longer resolves (a models file shrank the
		// window): fall back to defaults rather than fail reads.
		p = compaction.Defaults(m.ContextWindow)
	}
	cal, cached := cals[m.Name]
	if !cached {
		var err error
		if cal, err = e.calibration(ctx, s.Tenant, m); err != nil {
			return SessionView{}, err
		}
		if cals != nil {
			cals[m.Name] = cal
		}
	}
	messages := s.ActiveTokens + int64(tokens.FramingOf(m).ReplyPriming)
	est := estimate{system: s.SystemTokens, tools: s.ToolsTokens, messages: messages}
	if s.AnchorInput > 0 && s.AnchorEpoch == s.ViewEpoch && s.ActiveCount >= s.AnchorCount {
		est.anchor = &s
	}
	u := est.usage(m, known, p, cal, s.ActiveCount)
	u.Model = s.Model
	if !known {
		u.Warnings = append(u.Warnings, unknownModelWarning(s.Model))
	}
	return SessionView{Session: s, Usage: u}, nil
}

// GetSession returns a session with its usage and ledger.
func (e *Engine) GetSession(ctx context.Context, tenant, id string) (SessionView, error) {
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return SessionView{}, err
	}
	v, err := e.view(ctx, s)
	if err != nil {
		return v, err
	}
	// The ledger and the newest compaction come from the session's summary
	// row (one query; the compaction without its items and views).
	rows, err := e.store.ListSessions(ctx, tenant, store.ListFilter{ID: id, Limit: 1})
	if err != nil {
		return v, err
	}
	v.Ledger = &store.Ledger{}
	if len(rows) == 1 {
		*v.Ledger, v.LastCompaction = rows[0].Ledger, rows[0].LastCompaction
	}
	v.Warnings = sessionWarnings(v)
	return v, nil
}

// readSession reads a session without locking it; a missing one is an error
// that names it.
func (e *Engine) readSession(ctx context.Context, tenant, id string) (store.Session, error) {
	s, err := e.store.GetSession(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return s, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return s, err
}

// SessionUsage is GetContextUsage for a stored session: one read of the
// session row (plus the model's calibration for an approximate model), no
// scan, no tokenization. It does not read the ledger and the newest
// compaction as GetSession does (the summary row's four-way join cost 62 %
// of this call on SQLite: BenchmarkUsageVsHealth, docs/performance.md).
func (e *Engine) SessionUsage(ctx context.Context, tenant, id string) (Usage, error) {
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return Usage{}, err
	}
	v, err := e.view(ctx, s)
	return v.Usage, err
}

// DeleteSession deletes a session.
func (e *Engine) DeleteSession(ctx context.Context, tenant, id string) error {
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error { return tx.DeleteSession(ctx, tenant, id) })
	if err == nil {
		e.notify(ctx, tenant, id, 0, watch.EventDeleted)
	}
	return err
}

// DeleteUnusedSession deletes a session only while it is as it was created
// at created (version 1, nothing in its log), in one statement: the undo
// of a create whose request then failed, which must never delete what a
// concurrent request made again or wrote meanwhile. It reports whether it
// deleted.
func (e *Engine) DeleteUnusedSession(ctx context.Context, tenant, id string, created time.Time) (bool, error) {
	var deleted bool
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		deleted, err = tx.DeleteUnusedSession(ctx, tenant, id, created)
		return err
	})
	if err == nil && deleted {
		e.notify(ctx, tenant, id, 0, watch.EventDeleted)
	}
	return deleted, err
}

// DeleteSessionAt deletes a session only while it is at version and was
// created at created, in one statement: the undo of a request that made
// the session, appended to it and then failed upstream (nothing else wrote
// to it since), which must never delete what a concurrent request wrote.
// It reports whether it deleted.
func (e *Engine) DeleteSessionAt(ctx context.Context, tenant, id string, created time.Time, version int64) (bool, error) {
	var deleted bool
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		deleted, err = tx.DeleteSessionAt(ctx, tenant, id, created, version)
		return err
	})
	if err == nil && deleted {
		e.notify(ctx, tenant, id, 0, watch.EventDeleted)
	}
	return deleted, err
}

// ClaimSession moves session id (of the incarnation created at created)
// one version on and changes nothing else: the mark of a request that
// joined a session it did not make and wrote nothing to it (the gateway's
// unchanged join), so DeleteSessionAt of the request that made it — which
// deletes only at the version its own write left — never deletes it from
// under the joined request (on this replica or another). ErrNotFound
// when the session is gone or was made again.
func (e *Engine) ClaimSession(ctx context.Context, tenant, id string, created time.Time) error {
	var v int64
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		s, err := lockedSession(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		if !s.CreatedAt.Equal(created) {
			return fmt.Errorf("session %q was made again: %w", id, store.ErrNotFound)
		}
		s.Version++
		s.UpdatedAt = e.timestamp()
		v = s.Version
		return tx.UpdateSession(ctx, &s)
	})
	if err == nil {
		e.notify(ctx, tenant, id, v, watch.EventUpdated)
	}
	return err
}

// Page asks for one page of a listing.
type Page struct {
	Size  int
	Token string
}

// MaxPageSize is the most items a page of a listing (ListSessions,
// GetMessages, ListCompactions) holds, whatever page size is asked: a page
// reads at most MaxPageSize+1 rows from the store. The API refuses larger
// page_size values; callers of the engine get them clamped.
const MaxPageSize = 1000

// size is the page size asked, def when none (0 or less), at most
// MaxPageSize.
func (p Page) size(def int) int {
	switch {
	case p.Size <= 0:
		return def
	case p.Size > MaxPageSize:
		return MaxPageSize
	}
	return p.Size
}

// View names a list of a session's messages.
type View int

// Views.
const (
	ViewActive View = iota + 1
	ViewLog
)

// MessagePage is a page of messages.
type MessagePage struct {
	Messages []chat.Message
	Next     string
	Version  int64
}

// GetMessages returns a page of the active view or of the log.
func (e *Engine) GetMessages(ctx context.Context, tenant, id string, view View, page Page) (MessagePage, error) {
	size := page.size(100)
	prefix := map[View]string{ViewActive: "a", ViewLog: "l"}[view]
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return MessagePage{}, err
	}
	var after int64
	if page.Token != "" {
		if after, err = decodePageToken(page.Token, prefix, &s, ""); err != nil {
			return MessagePage{}, chat.Invalid("page_token", "is not a token this server issued for this view of this session")
		}
	}
	out := MessagePage{Version: s.Version}
	var cursors []int64
	cached, more := false, false
	if view == ViewActive {
		out.Messages, cursors, cached = e.views.page(&s, after, size+1)
	}
	if !cached {
		if out.Messages, cursors, more, err = e.readPage(ctx, tenant, id, view, after, size); err != nil {
			return MessagePage{}, err
		}
	}
	// A page ends at page_size messages or CONTEXTD_MAX_RESPONSE_BYTES,
	// whichever comes first (always at least one message).
	if n := e.fitResponse(out.Messages[:min(size, len(out.Messages))]); n < len(out.Messages) || more {
		out.Messages = out.Messages[:n]
		out.Next = encodePageToken(prefix, &s, "", cursors[n-1])
	}
	return out, nil
}

// AppendInput is an AppendMessages request.
type AppendInput struct {
	Messages        []chat.Message
	ExpectedVersion *int64
	IdempotencyKey  string
	// IncludeContent asks for the stored messages whole in the answer;
	// without it the answer names them (StoredRef): see appendanswer.go.
	IncludeContent bool
}

// AppendResult is what an append stored.
type AppendResult struct {
	Messages []chat.Message `json:"messages"`
	Version  int64          `json:"version"`
	Usage    Usage          `json:"-"`
	// Warnings say what the answer lacks that failed after the append was
	// committed (the call succeeds all the same: it is stored).
	Warnings []string `json:"-"`
}

// AppendMessages appends a batch atomically: all or none.
func (e *Engine) AppendMessages(ctx context.Context, tenant, id string, in AppendInput) (AppendResult, error) {
	res, _, err := e.appendMessages(ctx, tenant, id, in)
	return res, err
}

// appendMessages appends and also returns the session as the append left it,
// so PrepareContext need not read it again.
func (e *Engine) appendMessages(ctx context.Context, tenant, id string, in AppendInput) (AppendResult, SessionView, error) {
	if len(in.Messages) == 0 {
		return AppendResult{}, SessionView{}, chat.Invalid("messages", "must have at least one message")
	}
	if err := chat.CheckAppend("messages", in.Messages); err != nil {
		return AppendResult{}, SessionView{}, err
	}
	if err := chat.ValidateMessages("messages", in.Messages); err != nil {
		return AppendResult{}, SessionView{}, err
	}
	hash, err := requestHash(in)
	if err != nil {
		return AppendResult{}, SessionView{}, err
	}
	// Count outside the transaction, for the model the session has now; the
	// transaction recounts in the rare case that the model changed meanwhile.
	cur, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return AppendResult{}, SessionView{}, err
	}
	counted, err := e.countMessages(ctx, cur.Model, in.Messages)
	if err != nil {
		return AppendResult{}, SessionView{}, err
	}
	m, _ := e.models.Lookup(cur.Model)
	cal, err := e.calibration(ctx, tenant, m)
	if err != nil {
		return AppendResult{}, SessionView{}, err
	}
	var out appended
	for attempt := 1; ; attempt++ {
		out, err = e.appendOnce(ctx, tenant, id, in, hash, cur.Model, counted)
		if !errors.Is(err, errRepair) || attempt == 2 {
			break
		}
		if err = e.repairInterrupted(ctx, tenant, id); err != nil {
			break
		}
	}
	if err != nil {
		return AppendResult{}, SessionView{}, err
	}
	// Committed: from here on nothing fails the call (a retry would store
	// the batch twice); what cannot be answered is a warning.
	res, before, final := out.res, out.before, out.final
	if !out.replayed {
		e.views.appended(&before, &final, res.Messages)
		if !out.announced {
			e.notify(ctx, tenant, id, final.Version, watch.EventAppended)
		}
	}
	// The calibration read before the transaction: the usage needs no
	// further read.
	v, err := e.viewCached(ctx, final, map[string]*store.Calibration{m.Name: cal})
	if err != nil {
		e.log.WarnContext(ctx, "append: usage", "tenant", tenant, "session", id, "err", err)
		res.Warnings = append(res.Warnings, "usage unavailable: "+err.Error())
		v = SessionView{Session: final}
	}
	res.Usage = v.Usage
	return res, v, nil
}

// appended is what the transaction of an append did: its answer, the
// session before and after, and whether it was a replay.
type appended struct {
	res           AppendResult
	before, final store.Session
	replayed      bool
	announced     bool // in the transaction (announceTx)
}

// appendOnce is the transaction of an append; errRepair when the session's
// view needs repairInterrupted first.
func (e *Engine) appendOnce(ctx context.Context, tenant, id string, in AppendInput, hash, model string, counted []chat.Message) (appended, error) {
	var out appended
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		out = appended{}
		s, err := lockedSession(ctx, tx, tenant, id) // locks the session: appends serialize here
		if err != nil {
			return err
		}
		if in.IdempotencyKey != "" {
			rec, err := tx.GetIdempotency(ctx, tenant, id, in.IdempotencyKey)
			switch {
			case err == nil && rec.RequestHash == hash:
				out.final, out.replayed = s, true
				if err := json.Unmarshal(rec.Response, &out.res); err != nil {
					return err
				}
				if in.IncludeContent {
					return e.replayContent(ctx, tx, tenant, id, &out.res)
				}
				return nil
			case err == nil:
				return fmt.Errorf("idempotency key %q was used for a different request: %w", in.IdempotencyKey, ErrFailedPrecondition)
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
		}
		if in.ExpectedVersion != nil && *in.ExpectedVersion != s.Version {
			return fmt.Errorf("session %q is at version %d, not the expected %d: %w", id, s.Version, *in.ExpectedVersion, store.ErrVersionConflict)
		}
		out.before = s
		msgs := counted
		if s.Model != model {
			if msgs, err = e.countMessages(ctx, s.Model, in.Messages); err != nil {
				return err
			}
		}
		if msgs, err = e.appendInTx(ctx, tx, &s, msgs); err != nil {
			return err
		}
		if err := tx.UpdateSession(ctx, &s); err != nil {
			return err
		}
		if out.announced, err = e.announceTx(ctx, tx, tenant, id, s.Version, watch.EventAppended); err != nil {
			return err
		}
		out.res = AppendResult{Messages: msgs, Version: s.Version}
		out.final = s
		if in.IncludeContent {
			// Before the commit: an answer that cannot be sent must not
			// follow a stored append.
			if err := e.checkAppendAnswer(msgs); err != nil {
				return err
			}
		}
		return e.rememberAppend(ctx, tx, tenant, id, in.IdempotencyKey, hash, msgs, s.Version)
	})
	return out, err
}

// countMessages returns copies of msgs with Tokens set for model. It is
// where stored messages are tokenized, so it applies the count limits.
func (e *Engine) countMessages(ctx context.Context, model string, msgs []chat.Message) ([]chat.Message, error) {
	m, _, enc, err := e.modelFor(model)
	if err != nil {
		return nil, err
	}
	fr := tokens.FramingOf(m)
	release, err := e.admitCount(ctx, fr, "", "", nil, msgs)
	if err != nil {
		return nil, err
	}
	defer release()
	key, err := e.countKey(model)
	if err != nil {
		return nil, err
	}
	out := make([]chat.Message, len(msgs))
	var total int64
	for i := range msgs {
		out[i] = msgs[i]
		out[i].Tokens = tokens.CountMessage(enc, fr, &msgs[i]).Tokens
		out[i].CountedFor = key
		total += out[i].Tokens
	}
	e.metrics.TokensCounted(enc.Name(), total)
	return out, nil
}

func requestHash(in AppendInput) (string, error) {
	body, err := json.Marshal(struct {
		M []chat.Message `json:"m"`
		V *int64         `json:"v"`
	}{in.Messages, in.ExpectedVersion})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), nil
}

// appendInTx writes counted messages at the end of the log and the active
// view of s (locked by the caller), with a tool result recorded for every
// call the batch interrupts, and updates s in memory (the caller writes it).
// It returns the messages as stored.
func (e *Engine) appendInTx(ctx context.Context, tx store.Tx, s *store.Session, msgs []chat.Message) ([]chat.Message, error) {
	st, err := e.stageAppend(ctx, tx, s, msgs, e.timestamp(), false, false)
	if err != nil {
		return nil, err
	}
	return st.msgs, st.write(ctx, tx, s)
}

// stagedAppend is an append checked and laid out but not written yet.
type stagedAppend struct {
	msgs    []chat.Message // with ids, positions, kinds and timestamps
	entries []store.ViewEntry
	calls   []store.ToolCall
	bytes   int64 // viewBytes(msgs)
	// logQuota is the tenant's MaxLogBytesPerTenant for an append (0 for
	// what contextd writes on its own, such as interrupted results).
	logQuota int64
	// shared: the messages may repeat that log's (PrepareInput.Shared).
	shared store.SharedPrefix
}

// stageAppend checks an append against s and lays it out (stored at now),
// reading only.
//
// compacting says the append is PrepareContext's, which compacts the view
// it leaves (see checkViewBound); restart, that it is a client's compacted
// history, which may make again the calls it kept (pairToolCalls).
func (e *Engine) stageAppend(ctx context.Context, tx store.Tx, s *store.Session, msgs []chat.Message, now time.Time, compacting, restart bool) (stagedAppend, error) {
	msgs, calls, err := e.pairToolCalls(ctx, tx, s, msgs, restart)
	if err != nil {
		return stagedAppend{}, err
	}
	entries := make([]store.ViewEntry, len(msgs))
	for i := range msgs {
		pos := s.LogCount + int64(i) + 1
		msgs[i].Position, msgs[i].ID, msgs[i].Kind, msgs[i].CreatedAt = pos, "msg_"+strconv.FormatInt(pos, 10), chat.KindNormal, now
		entries[i] = store.ViewEntry{Ord: s.ViewSeq + int64(i) + 1, MessageID: msgs[i].ID}
	}
	bytes := viewBytes(msgs)
	if err := e.checkViewBound(s, msgs, bytes, compacting); err != nil {
		return stagedAppend{}, err
	}
	if err := e.checkViewMessages(s, msgs); err != nil {
		return stagedAppend{}, err
	}
	return stagedAppend{msgs: msgs, entries: entries, calls: calls, bytes: bytes, logQuota: e.limits.MaxLogBytesPerTenant}, nil
}

// apply updates s in memory as the append leaves it.
func (a stagedAppend) apply(s *store.Session) {
	if len(a.msgs) == 0 {
		return
	}
	s.Version++
	s.LogCount += int64(len(a.msgs))
	s.ViewSeq += int64(len(a.msgs))
	s.ActiveCount += int64(len(a.msgs))
	s.ActiveTokens += sumTokens(a.msgs)
	s.ActiveBytes += a.bytes
	s.UpdatedAt = a.msgs[0].CreatedAt
}

// write stores a staged append and updates s in memory.
func (a stagedAppend) write(ctx context.Context, tx store.Tx, s *store.Session) error {
	if len(a.msgs) == 0 {
		return nil
	}
	if err := a.insert(ctx, tx, s); err != nil {
		return err
	}
	if err := chargeLog(ctx, tx, s.Tenant, a.logQuota); err != nil {
		return err
	}
	if err := tx.AppendView(ctx, s.Tenant, s.ID, a.entries); err != nil {
		return err
	}
	if len(a.calls) > 0 {
		if err := tx.PutToolCalls(ctx, s.Tenant, s.ID, a.calls); err != nil {
			return err
		}
	}
	a.apply(s)
	return nil
}

// InterruptedMetadata marks the tool result contextd records for a tool
// call that the conversation moved on from without answering.
const InterruptedMetadata = "contextd.interrupted"

// interruptedContent is the text of such a result, as the model reads it.
const interruptedContent = "[interrupted: the conversation moved on before this tool call returned a result]"

// pairToolCalls checks that every tool result answers a known, unanswered
// call (made earlier in the session or the batch) and that call ids are
// unique. A tool call still unanswered when a message other than a tool
// result follows it (a user saying "stop", a new assistant turn) was
// interrupted: a tool result saying so (is_error, metadata
// contextd.interrupted) is inserted before that message, so the stored
// conversation stays one that every provider accepts. It returns the
// messages to store (counted) and the tool-call rows to write.
//
// restart: msgs are a client's compacted history (ViewEdit.Compaction),
// whose record covers the whole view before them. A client that compacts
// keeps its latest calls (Qwen Code keeps its last call and sends its
// result): such a call, made before msgs, may be made once again in
// them, and is then answered by them. A call left unanswered before msgs
// that they do not make again is closed without a result message (the
// compaction covers it: a result inserted now would answer a call the
// view no longer holds).
func (e *Engine) pairToolCalls(ctx context.Context, tx store.Tx, s *store.Session, msgs []chat.Message, restart bool) ([]chat.Message, []store.ToolCall, error) {
	var ids []string
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.Type {
			case chat.PartToolCall:
				ids = append(ids, p.ToolCall.ID)
			case chat.PartToolResult:
				ids = append(ids, p.ToolResult.ToolCallID)
			}
		}
	}
	known, err := tx.ToolCalls(ctx, s.Tenant, s.ID, ids)
	if err != nil {
		return nil, nil, err
	}
	openCalls, err := tx.OpenToolCalls(ctx, s.Tenant, s.ID)
	if err != nil {
		return nil, nil, err
	}
	// A client's compacted history closes the open calls without a
	// result message (below): nothing is interrupted, so there is nothing
	// a legacy session would place elsewhere.
	if !restart {
		if err := checkNotLegacy(ctx, tx, s, msgs, openCalls); err != nil {
			return nil, nil, err
		}
	}
	var open []string // unanswered calls, in the order they were made
	changed := map[string]bool{}
	for _, c := range openCalls {
		if restart {
			c.ResultPosition = max(1, s.LogCount)
			changed[c.CallID] = true
		} else {
			open = append(open, c.CallID)
		}
		known[c.CallID] = c
	}
	var violations []chat.Violation
	out := make([]chat.Message, 0, len(msgs))
	for i, m := range msgs {
		if m.Role != chat.RoleTool && len(open) > 0 {
			for _, callID := range open {
				if c, ok := known[callID]; ok && c.ResultPosition == 0 {
					r, err := e.interrupted(s.Model, callID)
					if err != nil {
						return nil, nil, err
					}
					out = append(out, r)
					c.ResultPosition = s.LogCount + int64(len(out))
					known[callID], changed[callID] = c, true
				}
			}
			open = open[:0]
		}
		pos := s.LogCount + int64(len(out)) + 1
		for j, p := range m.Parts {
			field := fmt.Sprintf("messages[%d].parts[%d]", i, j)
			switch p.Type {
			case chat.PartToolCall:
				if c, dup := known[p.ToolCall.ID]; dup && !(restart && c.Position <= s.LogCount) {
					violations = append(violations, chat.Violation{Field: field + ".tool_call.id",
						Description: fmt.Sprintf("tool call id %q is already used in this session", p.ToolCall.ID)})
					continue
				}
				known[p.ToolCall.ID] = store.ToolCall{CallID: p.ToolCall.ID, Position: pos}
				changed[p.ToolCall.ID] = true
				open = append(open, p.ToolCall.ID)
			case chat.PartToolResult:
				c, ok := known[p.ToolResult.ToolCallID]
				switch {
				case !ok:
					violations = append(violations, chat.Violation{Field: field + ".tool_result.tool_call_id",
						Description: fmt.Sprintf("messages[%d] answers tool call %q, which no earlier assistant message made", i, p.ToolResult.ToolCallID)})
				case c.ResultPosition != 0:
					violations = append(violations, chat.Violation{Field: field + ".tool_result.tool_call_id",
						Description: fmt.Sprintf("tool call %q already has a result (message at position %d); a call is answered by the tool messages right after its assistant message, and one that a later message interrupted is recorded as interrupted", c.CallID, c.ResultPosition)})
				default:
					c.ResultPosition = pos
					known[c.CallID] = c
					changed[c.CallID] = true
					open = slices.DeleteFunc(open, func(id string) bool { return id == c.CallID })
				}
			}
		}
		out = append(out, m)
	}
	if len(violations) > 0 {
		return nil, nil, &chat.InvalidError{Violations: violations}
	}
	calls := make([]store.ToolCall, 0, len(changed))
	for callID := range changed {
		calls = append(calls, known[callID])
	}
	return out, calls, nil
}

// checkNotLegacy returns errRepair when an append would record an
// interrupted result for a call that a stored message already followed (a
// session written before interrupted calls were recorded): the result
// belongs right after the call, where repairInterrupted puts it. Only an
// append that interrupts a call made before the newest stored message reads
// the view.
func checkNotLegacy(ctx context.Context, tx store.Tx, s *store.Session, msgs []chat.Message, open []store.ToolCall) error {
	interrupts := slices.ContainsFunc(msgs, func(m chat.Message) bool { return m.Role != chat.RoleTool })
	followed := slices.ContainsFunc(open, func(c store.ToolCall) bool { return c.Position < s.LogCount })
	if !interrupts || !followed {
		return nil
	}
	view, err := tx.ViewMessages(ctx, s.Tenant, s.ID)
	if err != nil {
		return err
	}
	if needsRepair(view) && len(danglingCalls(view)) > 0 {
		return errRepair
	}
	return nil
}

// interrupted is the tool result recorded for an interrupted call, counted
// for model.
func (e *Engine) interrupted(model, callID string) (chat.Message, error) {
	m := chat.Message{Role: chat.RoleTool, Metadata: map[string]string{InterruptedMetadata: "true"},
		Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: callID, Content: interruptedContent, IsError: true}}}}
	counted, err := e.countMessages(context.Background(), model, []chat.Message{m})
	if err != nil {
		return chat.Message{}, err
	}
	return counted[0], nil
}
