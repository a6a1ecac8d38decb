package engine

import (
	"context"
	"fmt"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// Rewriting a large active view (ClearMessages, RevertCompaction) without
// holding the store's writer for long. SQLite has one writer: a clear or
// revert of a view of 100,000 messages that read, deleted and rewrote the
// whole view in one transaction held every other session's appends back
// for seconds. Now:
//
//   - what the rewrite needs of the view is read before its transaction,
//     without the writer; the transaction checks that the view only grew
//     since (same epoch) and reads only the messages appended meanwhile;
//   - a revert's restored view is written as a new generation of the view
//     (store.Tx.StageView), viewBatch entries a transaction, invisible to
//     readers, and made the session's in the one short transaction that
//     also records the revert (store.Tx.FlipView);
//   - the rows of the replaced generation are deleted afterwards, viewBatch
//     a transaction (sweepViews).
//
// Readers see the old view or the new one, never a mix. A crash between
// batches leaves staged rows nobody reads (swept after the session's next
// rewrite, or by retention's sweep of abandoned generations) and the view
// as it was; nothing is lost.

// viewBatch is how many view entries one transaction of a rewrite stages
// or sweeps (about 10 ms of SQLite's writer).
var viewBatch = 1000

// errViewMoved: the view was rewritten between the read before a
// transaction and the transaction; the call starts again (rewriteAttempts
// times; then the caller gets Aborted, to retry).
var errViewMoved = fmt.Errorf("the active view was rewritten while this call read it; try again: %w", store.ErrVersionConflict)

// rewriteAttempts bounds the starts of a rewrite whose view keeps being
// rewritten by others.
const rewriteAttempts = 3

// readView reads a session and its active view, consistent with each
// other, without the writer.
func (e *Engine) readView(ctx context.Context, tenant, id string) (store.Session, []chat.Message, error) {
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return s, nil, err
	}
	view, _, s, err := e.viewOf(ctx, s)
	return s, view, err
}

// grownSince returns the messages appended to the view of s (locked in
// tx's transaction) since read, the session as read before it: nothing
// when it is unchanged, errViewMoved when it was rewritten meanwhile.
func (e *Engine) grownSince(ctx context.Context, s, read *store.Session) ([]chat.Message, error) {
	if s.ViewEpoch != read.ViewEpoch || !s.CreatedAt.Equal(read.CreatedAt) || s.ViewSeq < read.ViewSeq || s.ActiveCount < read.ActiveCount {
		return nil, errViewMoved
	}
	if s.ViewSeq == read.ViewSeq {
		return nil, nil
	}
	// The session's row is held: no append can commit meanwhile, so a read
	// outside the transaction sees what the transaction would.
	extra, _, err := e.store.ActiveMessages(ctx, s.Tenant, s.ID, read.ViewSeq, int(s.ActiveCount-read.ActiveCount)+1)
	if err != nil {
		return nil, err
	}
	if int64(len(extra)) != s.ActiveCount-read.ActiveCount {
		return nil, errViewMoved
	}
	return extra, nil
}

// stageView writes ids as view generation gen, viewBatch entries a
// transaction.
func (e *Engine) stageView(ctx context.Context, tenant, id string, gen int64, ids []string) error {
	for start := 0; start < len(ids); start += viewBatch {
		end := min(start+viewBatch, len(ids))
		if err := e.store.InTx(ctx, func(ctx context.Context, tx store.Tx) error {
			return tx.StageView(ctx, tenant, id, gen, store.Entries(ids[start:end], int64(start)))
		}); err != nil {
			return fmt.Errorf("stage the view: %w", err)
		}
	}
	return nil
}

// sweepViews deletes the rows of the session's replaced or abandoned view
// generations, viewBatch a transaction. The call that rewrote the view has
// committed, so a failure is logged, not returned; the next rewrite sweeps
// what is left.
func (e *Engine) sweepViews(ctx context.Context, tenant, id string) {
	ctx = context.WithoutCancel(ctx)
	for {
		n, err := e.store.SweepViews(ctx, tenant, id, viewBatch)
		if err != nil {
			e.log.WarnContext(ctx, "view sweep", "tenant", tenant, "session", id, "err", err)
			return
		}
		if n < viewBatch {
			return
		}
	}
}

// stagedRevert is a revert's restored view, read and staged before its
// transaction: the session and view as read, the restored ids and
// messages, and the generation they were staged as.
type stagedRevert struct {
	read store.Session
	view []chat.Message
	ids  []string
	msgs []chat.Message
	gen  int64
}

// stageRevert reads what reverting compactionID would restore and stages
// it. Nil (and no error) when the revert cannot be judged before its
// transaction (already reverted, a later compaction changed the view): the
// transaction then reads and refuses as it always did.
func (e *Engine) stageRevert(ctx context.Context, tenant, id, compactionID string) (*stagedRevert, error) {
	read, view, err := e.readView(ctx, tenant, id)
	if err != nil {
		return nil, nil
	}
	c, err := e.store.GetCompaction(ctx, tenant, id, compactionID)
	if err != nil || c.RevertedAt != nil {
		return nil, nil
	}
	cur := idsOf(view)
	if len(cur) < len(c.ViewAfter) || !equalIDs(cur[:len(c.ViewAfter)], c.ViewAfter) {
		return nil, nil
	}
	st := &stagedRevert{read: read, view: view, gen: store.NewViewGen()}
	st.ids = append(append([]string{}, c.ViewBefore...), cur[len(c.ViewAfter):]...)
	for i := 0; i < len(st.ids); i += viewBatch {
		chunk, err := e.store.MessagesByID(ctx, tenant, id, st.ids[i:min(i+viewBatch, len(st.ids))])
		if err != nil {
			return nil, err
		}
		st.msgs = append(st.msgs, chunk...)
	}
	if err := e.stageView(ctx, tenant, id, st.gen, st.ids); err != nil {
		return nil, err
	}
	return st, nil
}
