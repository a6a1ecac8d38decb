package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// The answer to an append names what was stored (ids, positions, token
// counts) rather than echoing it: an append of up to
// CONTEXTD_MAX_MESSAGE_BYTES (16 MiB) echoed whole would be larger than a
// client receives (4 MiB by default), so a call that committed would look
// failed and its retry store the batch twice. The content comes back only
// when asked for, and then the answer is checked against
// CONTEXTD_MAX_RESPONSE_BYTES before the commit. An idempotency key's record
// keeps the light answer too (a replay asking for content reads it back).

// StoredRef is m without its content: id, position, role, kind, name,
// pinned, token count and time; of its metadata only the mark of an
// interrupted-call result the server recorded.
func StoredRef(m chat.Message) chat.Message {
	ref := chat.Message{ID: m.ID, Position: m.Position, Role: m.Role, Kind: m.Kind, Name: m.Name, Pinned: m.Pinned,
		Tokens: m.Tokens, CreatedAt: m.CreatedAt}
	if v, ok := m.Metadata[InterruptedMetadata]; ok {
		ref.Metadata = map[string]string{InterruptedMetadata: v}
	}
	return ref
}

// appendAnswerOverhead is what an append's answer holds besides its
// messages (version, usage, warnings), generously.
const appendAnswerOverhead = 8 << 10

// checkAppendAnswer refuses an answer carrying msgs whole that would be
// over MaxResponseBytes.
func (e *Engine) checkAppendAnswer(msgs []chat.Message) error {
	limit := e.limits.MaxResponseBytes
	if limit <= 0 {
		return nil
	}
	n := appendAnswerOverhead
	for i := range msgs {
		if n += messageBytes(&msgs[i]); n > limit {
			return fmt.Errorf("the %d stored messages with their content are more than %s (%d bytes) allows in one response; nothing was appended: leave include_content unset (the answer then names the messages: ids, positions, token counts) and read them with GetMessages: %w",
				len(msgs), limitResponseBytes, limit, ErrResourceExhausted)
		}
	}
	return nil
}

// rememberAppend stores the answer to an append with an idempotency key,
// without the messages' content.
func (e *Engine) rememberAppend(ctx context.Context, tx store.Tx, tenant, id, key, hash string, msgs []chat.Message, version int64) error {
	if key == "" {
		return nil
	}
	refs := make([]chat.Message, len(msgs))
	for i := range msgs {
		refs[i] = StoredRef(msgs[i])
	}
	body, err := json.Marshal(AppendResult{Messages: refs, Version: version})
	if err != nil {
		return err
	}
	return tx.PutIdempotency(ctx, tenant, id, store.Idempotency{Key: key, RequestHash: hash, Response: body})
}

// replayContent fills the messages of a remembered answer with their stored
// content, for a replay that asks for it, within the same response bound.
func (e *Engine) replayContent(ctx context.Context, tx store.Tx, tenant, id string, res *AppendResult) error {
	ids := make([]string, len(res.Messages))
	for i, m := range res.Messages {
		ids[i] = m.ID
	}
	msgs, err := tx.MessagesByID(ctx, tenant, id, ids)
	if err != nil {
		return fmt.Errorf("read the stored messages of the replayed append: %w", err)
	}
	if err := e.checkAppendAnswer(msgs); err != nil {
		return err
	}
	res.Messages = msgs
	return nil
}
