package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/tokens"
)

// countKey names what a message's token count depends on for model: its
// encoding and its chat framing (template or per-message rule), as
// "<encoding>/<12 hex digits of a digest of the framing>". Stored with each
// count (chat.Message.CountedFor), it tells a revert or an expand which
// counts are still good after model changes; models that share an encoding
// and framing share the key, so switching between them recounts nothing.
func (e *Engine) countKey(model string) (string, error) {
	m, _, enc, err := e.modelFor(model)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(struct {
		Template string
		Framing  tokens.Framing
	}{m.Template, tokens.FramingOf(m)})
	if err != nil {
		return "", fmt.Errorf("count key of %q: %w", model, err)
	}
	sum := sha256.Sum256(body)
	return enc.Name() + "/" + hex.EncodeToString(sum[:6]), nil
}

// recountStale counts, for model (whose key is key), the messages whose
// stored count was made for something else or for an unknown model (rows
// from before counted_for, stored NULL), and returns their new counts by
// id. It never fails for the messages' sake: a chunk the counter rejects
// (an image it cannot size, a message over a limit that changed) is retried
// a message at a time, and a message that still fails keeps its stored
// count and key (so it is tried again next time) and is logged. Work: one
// count of the stale messages, in chunks within the count limits.
func (e *Engine) recountStale(ctx context.Context, model, key string, msgs []chat.Message) map[string]int64 {
	var stale []chat.Message
	for i := range msgs {
		if msgs[i].CountedFor != key {
			stale = append(stale, msgs[i])
		}
	}
	if len(stale) == 0 {
		return nil
	}
	out := make(map[string]int64, len(stale))
	defer func() { e.metrics.MessagesRecounted(strings.SplitN(key, "/", 2)[0], len(out)) }()
	counted, err := e.recount(ctx, model, stale)
	if err == nil {
		for i := range counted {
			out[counted[i].ID] = counted[i].Tokens
		}
		return out
	}
	if ctx.Err() != nil {
		return out
	}
	for i := range stale {
		one, err := e.countMessages(ctx, model, stale[i:i+1])
		if err != nil {
			e.log.WarnContext(ctx, "recount failed; the stored count is kept", "model", model, "message_id", stale[i].ID, "error", err)
			continue
		}
		out[one[0].ID] = one[0].Tokens
	}
	return out
}
