package engine

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/watch"
)

// A client edit is a compaction by the client. A client that resends an
// old message in a newer version (Qwen Code replaces old tool results with
// "[Old tool result content cleared]", Claude Code fills schema defaults
// into old tool calls) sends that version upstream; the session counts it
// too. The client's version is stored as a message of its own (no log
// position, like a placeholder: the log keeps the original, byte for byte,
// expandable), put in the active view in place of the message it edits,
// with its own exact token count; the change is recorded as a compaction
// of tier "client_edit", so RevertCompaction restores the view before it.
// The used percentage and the next compaction decisions then count what
// the client sends.

// ClientEditTier names the record of client edits.
const ClientEditTier = "client_edit"

// ProviderCompactionTier names the record of the messages a provider's
// own compaction dropped (chat.MetaProviderDropped): their versions count
// nothing and are pinned, and still go upstream as the client sends them.
const ProviderCompactionTier = "provider_compaction"

// EditOfMetadata is the metadata key of a client's version of a message:
// the id of the log message it edits.
const EditOfMetadata = "contextd.edit_of"

// ClientEditInput is a RecordClientEdits request.
type ClientEditInput struct {
	// Client returns the client's version of a message of the active view
	// when it differs from the stored one (the caller matches messages: the
	// gateway by their history chains); it is called once per message of
	// the view, summaries and placeholders excluded.
	Client func(stored *chat.Message) (chat.Message, bool)
	// Max bounds the edits one call records: those that change the most
	// text; the rest wait for the next call.
	Max int
	// MinBytes: edits are recorded only once the text they change (the
	// sum of |client − stored| bytes over the messages found) reaches it;
	// smaller ones wait, found again with the client's next requests
	// (which resend them), so a client that changes a few bytes of each
	// old message (Claude Code's schema defaults) does not rewrite the
	// view on every call. 0: every edit.
	MinBytes int64
	// Expected and Created: the session as the caller matched it (its
	// version and incarnation); edits are recorded only on that version
	// (ErrVersionConflict otherwise).
	Expected int64
	Created  time.Time
	// Tier and Reason name the record and its items (default
	// ClientEditTier, "the client sent a newer version of this message"):
	// ProviderCompactionTier for the messages a provider's compaction
	// dropped (gateway/providercompaction.go).
	Tier, Reason string
}

// ClientEditResult is what RecordClientEdits did.
type ClientEditResult struct {
	// Edited is how many messages were edited (0: nothing was written);
	// Pending how many the client changed that were not recorded (less
	// than MinBytes in all, or past Max).
	Edited, Pending int
	// Version is the session's version after the call.
	Version    int64
	Compaction *store.Compaction
}

// RecordClientEdits records the client's versions of messages of the
// active view of session id at version expected. With nothing to edit it
// reads at most the session and its view (nothing when the engine's view
// cache holds the view at that version) and writes nothing. Work: one
// Client call per view message, one count of at most Max messages and one
// transaction that writes them, the view's new generation and the record;
// memory: the client's versions found (shallow copies of the request's).
// A session that moved since expected is ErrVersionConflict (the caller
// matches again), so two replicas never record one edit twice; edits that
// would take the tenant past its log quota are ErrResourceExhausted
// (nothing written).
func (e *Engine) RecordClientEdits(ctx context.Context, tenant, id string, in ClientEditInput) (ClientEditResult, error) {
	expected := in.Expected
	view, read, written, err := e.viewAt(ctx, tenant, id, expected, in.Created)
	if err != nil {
		return ClientEditResult{}, err
	}
	p, pending, err := e.planClientEdits(ctx, view, in, e.roundAt(ctx, tenant, id, expected, read))
	if err != nil || p == nil {
		return ClientEditResult{Version: expected, Pending: pending}, err
	}
	final, err := e.commitClientView(ctx, tenant, id, expected, written, p)
	if err != nil {
		return ClientEditResult{}, err
	}
	return ClientEditResult{Edited: len(p.rec.Items), Pending: pending, Version: final.Version, Compaction: p.rec}, nil
}

// editPlan is a client edit planned on a view: the versions to store
// (counted), the view after, and the record.
type editPlan struct {
	counted, after []chat.Message
	rec            *store.Compaction
}

// planClientEdits plans in's edits of view; nil when there is nothing
// to record (pending: how many wait). at says the session's model and the
// round the record takes; it is called only when there is something to
// record.
func (e *Engine) planClientEdits(ctx context.Context, view []chat.Message, in ClientEditInput, at func() (string, int, error)) (*editPlan, int, error) {
	type edit struct {
		at       int
		old, new chat.Message
		delta    int64 // |client − stored| text bytes
	}
	var edits []edit
	for i := range view {
		old := &view[i]
		if old.Kind != "" && old.Kind != chat.KindNormal {
			continue // contextd's own: the client never sent it
		}
		v, ok := in.Client(old)
		if !ok || v.Role != old.Role {
			continue
		}
		delta := int64(abs(textBytes("", "", nil, []chat.Message{v}) - textBytes("", "", nil, view[i:i+1])))
		edits = append(edits, edit{at: i, old: *old, new: v, delta: delta})
	}
	var changed int64
	for _, ed := range edits {
		changed += ed.delta
	}
	if len(edits) == 0 || changed < in.MinBytes {
		return nil, len(edits), nil
	}
	pending := 0
	if in.Max > 0 && len(edits) > in.Max {
		// The Max that change the most; the rest wait for the next call.
		slices.SortStableFunc(edits, func(a, b edit) int { return cmp.Compare(b.delta, a.delta) })
		pending, edits = len(edits)-in.Max, edits[:in.Max]
		slices.SortFunc(edits, func(a, b edit) int { return cmp.Compare(a.at, b.at) })
	}
	model, round, err := at()
	if err != nil {
		return nil, pending, err
	}
	now := e.timestamp()
	news := make([]chat.Message, len(edits))
	for i, ed := range edits {
		m := ed.new
		// Pinned: the client's version's pin, or the stored one's — not
		// the pin of a provider's drop, which only the caller renews.
		m.ID, m.Position, m.Kind, m.Pinned, m.CreatedAt = fmt.Sprintf("edit_%d_%d", round, i+1), 0, chat.KindNormal, ed.new.Pinned || ed.old.Pinned && !ed.old.ProviderDropped(), now
		// The edit stands for the log's original (an edit of an edit, for
		// the same original).
		orig := ed.old.ID
		if o := ed.old.Metadata[EditOfMetadata]; o != "" {
			orig = o
		}
		m.Replaces = []string{orig}
		m.Metadata = maps.Clone(m.Metadata)
		if m.Metadata == nil {
			m.Metadata = map[string]string{}
		}
		if h, ok := ed.old.Metadata[store.HistoryMetadata]; ok {
			m.Metadata[store.HistoryMetadata] = h // its place in the client's history
		}
		m.Metadata[EditOfMetadata] = orig
		news[i] = m
	}
	counted, err := e.recount(ctx, model, news) // in chunks within the count limits
	if err != nil {
		return nil, pending, err
	}
	after := append([]chat.Message(nil), view...)
	tier, reason := cmp.Or(in.Tier, ClientEditTier), cmp.Or(in.Reason, "the client sent a newer version of this message")
	rec := &store.Compaction{ID: fmt.Sprintf("cmp_%d", round), Round: round, Tiers: []string{tier},
		CreatedAt: now, ExpiresAt: now.Add(e.revertWindow), ViewBefore: idsOf(view)}
	for i, ed := range edits {
		after[ed.at] = counted[i]
		// What an edit replaces is the original (an edit of an edit too):
		// retention keeps what items replace, so naming the version before
		// would keep every version a client ever sent; that one stays only
		// while the record can be reverted (its view before).
		rec.Items = append(rec.Items, store.CompactionItem{Tier: tier, NewID: counted[i].ID, Replaced: news[i].Replaces,
			Reason: reason, TokensBefore: ed.old.Tokens, TokensAfter: counted[i].Tokens})
	}
	rec.ViewAfter = idsOf(after)
	rec.TokensBefore, rec.TokensAfter = sumTokens(view), sumTokens(after)
	return &editPlan{counted: counted, after: after, rec: rec}, pending, nil
}

// roundAt is planning's at for session id at version expected: its model
// and the round its record takes, from read (the row viewAt read, at
// expected) or, when viewAt read none, from the row read then.
func (e *Engine) roundAt(ctx context.Context, tenant, id string, expected int64, read *store.Session) func() (string, int, error) {
	return func() (string, int, error) {
		if read != nil {
			return read.Model, read.CompactionRound + 1, nil
		}
		s, err := e.readSession(ctx, tenant, id)
		if err == nil {
			err = checkVersion(id, s.Version, &expected)
		}
		return s.Model, s.CompactionRound + 1, err
	}
}

// commitClientView writes the client edits p in one transaction on the
// session at version expected, the write of that version p was planned
// on (written: the version alone does not name a view, viewcache.go), and
// announces them.
func (e *Engine) commitClientView(ctx context.Context, tenant, id string, expected int64, written time.Time, p *editPlan) (store.Session, error) {
	var final store.Session
	err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
		s, err := lockForEdit(ctx, tx, tenant, id, &expected)
		if err != nil {
			return err
		}
		if !s.UpdatedAt.Truncate(time.Microsecond).Equal(written) {
			// A read showed a commit the server then lost, whose
			// version another replica wrote again: the cached view is
			// not the stored one.
			e.views.drop(tenant, id)
			return fmt.Errorf("session %q moved since its view was read: %w", id, store.ErrVersionConflict)
		}
		if err := e.applyEdits(ctx, tx, &s, []*editPlan{p}); err != nil {
			return err
		}
		final = s
		return tx.UpdateSession(ctx, &s)
	})
	if err != nil {
		return store.Session{}, err
	}
	e.views.wrote(&final, p.after, viewOrds(len(p.after)), messagesBytes(p.after))
	e.sweepViews(ctx, tenant, id)
	e.notify(ctx, tenant, id, final.Version, watch.EventCompacted)
	return final, nil
}

// applyEdits writes plans (each planned on the view the one before
// leaves) in tx on s (locked, at the version the first was planned on),
// and moves s as they leave the session; the caller updates its row. Each
// plan's messages, record and counters, but the view only once, the last
// plan's (the ones between would be generations replaced in the same
// transaction), and the quota read once.
func (e *Engine) applyEdits(ctx context.Context, tx store.Tx, s *store.Session, plans []*editPlan) error {
	for _, p := range plans {
		if err := tx.InsertMessages(ctx, s.Tenant, s.ID, p.counted); err != nil {
			return err
		}
	}
	// The client's versions are stored messages of the tenant's, as an
	// append's are: within its log quota (quotas.go).
	if err := chargeLog(ctx, tx, s.Tenant, e.limits.MaxLogBytesPerTenant); err != nil {
		return err
	}
	if err := tx.ReplaceView(ctx, s.Tenant, s.ID, plans[len(plans)-1].rec.ViewAfter); err != nil {
		return err
	}
	for _, p := range plans {
		if err := tx.InsertCompaction(ctx, s.Tenant, s.ID, p.rec); err != nil {
			return err
		}
		editMoves(s, p)
	}
	return nil
}

// editMoves moves s as plan p leaves the session.
func editMoves(s *store.Session, p *editPlan) {
	s.Version++
	s.ViewEpoch++ // the view's messages changed (an anchor described the old ones)
	s.CompactionRound = p.rec.Round
	s.ActiveTokens = p.rec.TokensAfter
	s.ActiveBytes = viewBytes(p.after)
	s.ActiveCount, s.ViewSeq = int64(len(p.after)), int64(len(p.after))
	s.UpdatedAt = p.rec.CreatedAt
}

// viewAt is the active view of session id at version expected of
// incarnation created: from the view cache when it holds that version
// (nothing read), else read (the session and the view, which
// PrepareContext then finds cached); the session's row when it read it
// (nil from the cache), which the caller then need not read again; and
// the write of that version the view is of (UpdatedAt, to the
// microsecond), which the caller's commit checks.
func (e *Engine) viewAt(ctx context.Context, tenant, id string, expected int64, created time.Time) ([]chat.Message, *store.Session, time.Time, error) {
	// Only a view a read showed: expected names a version, not its write
	// (viewcache.go); a read may show a commit the server then loses, so
	// the write is checked with the commit (commitClientView).
	if ent := e.views.get(tenant, id); ent != nil && ent.version == expected && ent.stamp.created.Equal(created) &&
		ent.sure == len(ent.msgs) && ent.sureVersion == expected {
		return ent.msgs, nil, ent.updated, nil
	}
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	if err := checkVersion(id, s.Version, &expected); err != nil {
		return nil, nil, time.Time{}, err
	}
	view, _, s, err := e.viewOf(ctx, s)
	if err == nil {
		err = checkVersion(id, s.Version, &expected)
	}
	return view, &s, s.UpdatedAt.Truncate(time.Microsecond), err
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
