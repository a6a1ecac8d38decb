package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// Client edits in PrepareContext's own transaction (PrepareInput.Edits):
// the gateway's client edits, provider drops and picks are written with
// the append they come with, so a call that fails records none of them
// and one that committed them never answers an error. They are planned
// before the transaction on the view at the version the caller matched
// (PrepareInput.ExpectedVersion: the engine's view cache holds it, or it
// is read once), and written first in each transaction that writes the
// append, only on that version.

// ViewEdit is one client edit of PrepareInput.Edits: RecordClientEdits'
// (Client: its Expected and Created are not read, the call's
// ExpectedVersion and the session it reads stand for them), a pick
// (pick.go) or a client compaction (clientcompaction.go: the call's only
// edit, its items name the log's next message, the first the call
// appends).
type ViewEdit struct {
	Client     *ClientEditInput
	Pick       *PickInput
	Compaction *ClientCompactionInput
}

// planPrepareEdits plans in.Edits on view (cached: the view of cur; moved
// when the session moved since the row was read), each on the view the
// one before leaves; the plans and the view after them (nil: no edit to
// record). An empty view is no move: its edits plan nothing.
func (e *Engine) planPrepareEdits(ctx context.Context, id string, cur store.Session, view []chat.Message, moved bool, in PrepareInput) ([]*editPlan, []chat.Message, error) {
	if len(in.Edits) == 0 {
		return nil, nil, nil
	}
	if in.ExpectedVersion == nil || moved || cur.Version != *in.ExpectedVersion {
		return nil, nil, fmt.Errorf("session %q moved since the edits were found: %w", id, store.ErrVersionConflict)
	}
	round := cur.CompactionRound
	at := func() (string, int, error) { return cur.Model, round + 1, nil }
	var plans []*editPlan
	for _, ed := range in.Edits {
		var p *editPlan
		var err error
		switch {
		case ed.Client != nil:
			p, _, err = e.planClientEdits(ctx, view, *ed.Client, at)
		case ed.Pick != nil:
			p, err = e.planPick(ctx, view, *ed.Pick, at)
		case ed.Compaction != nil:
			if len(in.Edits) != 1 {
				return nil, nil, chat.Invalid("edits", "a client compaction is the call's only edit")
			}
			p = e.planClientCompaction(view, *ed.Compaction, &cur)
		}
		if err != nil {
			return nil, nil, err
		}
		if p != nil {
			round++
			plans = append(plans, p)
			view = p.after
		}
	}
	if len(plans) == 0 {
		return nil, nil, nil
	}
	return plans, view, nil
}

// writeEdits writes pr's edits first in a transaction on s (locked),
// which must be the session they were planned on (else moved).
func (e *Engine) writeEdits(ctx context.Context, tx store.Tx, s *store.Session, pr *prepared, moved error) error {
	if len(pr.edits) == 0 {
		return nil
	}
	if !sameWrite(s, &pr.edBase) || stampOf(s) != stampOf(&pr.edBase) {
		return fmt.Errorf("session %q moved since the edits were found: %w", s.ID, moved)
	}
	return e.applyEdits(ctx, tx, s, pr.edits)
}

// editsWritten caches the view a call with edits committed (final's) and
// sweeps the view generations they replaced.
func (e *Engine) editsWritten(ctx context.Context, final *store.Session, view []chat.Message) {
	e.views.wrote(final, view, viewOrds(len(view)), messagesBytes(view))
	e.sweepViews(ctx, final.Tenant, final.ID)
}

// restartsHistory reports whether in's append is a client's compacted
// history (ViewEdit.Compaction), which may make its kept calls again
// (pairToolCalls).
func restartsHistory(in PrepareInput) bool {
	return slices.ContainsFunc(in.Edits, func(ed ViewEdit) bool { return ed.Compaction != nil })
}
