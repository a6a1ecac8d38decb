package engine

import (
	"fmt"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// viewBytes is the size of messages as the active view keeps them (the
// estimate responses are sized with: text, ids, metadata and a fixed
// allowance per message and part).
func viewBytes(msgs []chat.Message) int64 {
	var n int64
	for i := range msgs {
		n += int64(messageBytes(&msgs[i]))
	}
	return n
}

// checkViewBound refuses an append that would grow s's active view past
// MaxViewBytes or past MaxViewWindows times its model's context window in
// tokens (a view already past the latter, after a change of model, takes
// only PrepareContext's appends, each within the bound alone, which compact
// it). Everything that reads the whole view (PrepareContext, compaction,
// CreateHandoff) is then bounded too: a view of 210 MB once made every
// PrepareContext take a minute and fail.
//
// An append that is over the bound on its own is the request's fault:
// InvalidArgument on messages. One that fits alone but not on top of the
// view is FailedPrecondition: the session must be compacted (or cleared)
// first, and the same request then succeeds. Either way nothing is stored.
func (e *Engine) checkViewBound(s *store.Session, msgs []chat.Message, bytes int64, compacting bool) error {
	tokens := sumTokens(msgs)
	var what string
	var alone bool
	if max := int64(e.limits.MaxViewBytes); max > 0 && s.ActiveBytes+bytes > max {
		what = fmt.Sprintf("%d bytes; %s allows %d", s.ActiveBytes+bytes, limitViewBytes, max)
		alone = bytes > max
	}
	if k := int64(e.limits.MaxViewWindows); what == "" && k > 0 {
		m, _ := e.models.Lookup(s.Model)
		// A view already over the bound (its session moved to a model
		// with a smaller window) still takes the append PrepareContext
		// compacts it with, when the append fits the bound alone; any
		// other append past the bound is refused.
		bound := k * int64(m.ContextWindow)
		overAlready := compacting && s.ActiveTokens > bound && tokens <= bound
		if bound > 0 && s.ActiveTokens+tokens > bound && !overAlready {
			what = fmt.Sprintf("%d tokens; %s allows %d× the %d-token window of %s, %d", s.ActiveTokens+tokens,
				limitViewWindows, k, m.ContextWindow, s.Model, bound)
			alone = tokens > bound
		}
	}
	if what == "" {
		return nil
	}
	if alone {
		return chat.Invalid("messages", "would make the active view %s, on its own", what)
	}
	return fmt.Errorf("the append would make session %q's active view %s; compact or clear it first: %w",
		s.ID, what, ErrFailedPrecondition)
}
