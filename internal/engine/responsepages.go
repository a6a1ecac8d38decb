package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// Pages of ListCompactions and ExpandMessage end at MaxResponseBytes, like
// those of GetMessages, so a session with many or large compactions, or a
// summary standing for megabytes of originals, reads within a default
// client's 4 MB receive limit.

// CompactionPage is a page of a session's compactions, in round order.
type CompactionPage struct {
	Compactions []store.Compaction
	Next        string
}

// ListCompactions returns a page of a session's compactions in round order
// (oldest first; the round, not a replica's clock, is the order): it ends at
// page.Size (0: 100, at most MaxPageSize) compactions or MaxResponseBytes,
// whichever comes first, and holds at least one compaction when any remain.
// It reads one page (and one compaction more, to know whether others
// follow) from the store, wherever the page is in the listing.
func (e *Engine) ListCompactions(ctx context.Context, tenant, id string, page Page) (CompactionPage, error) {
	size := page.size(100)
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return CompactionPage{}, err
	}
	after := 0
	if page.Token != "" {
		round, err := decodePageToken(page.Token, "c", &s, "")
		if err != nil || round < 1 || round > int64(s.CompactionRound) {
			return CompactionPage{}, chat.Invalid("page_token", "is not a token this server issued for ListCompactions of this session")
		}
		after = int(round)
	}
	rest, err := e.store.ListCompactions(ctx, tenant, id, after, size+1)
	if err != nil {
		return CompactionPage{}, err
	}
	n, total := 0, 0
	for n < len(rest) && n < size {
		total += compactionBytes(&rest[n])
		if n > 0 && e.limits.MaxResponseBytes > 0 && total > e.limits.MaxResponseBytes {
			break
		}
		n++
	}
	out := CompactionPage{Compactions: rest[:n]}
	if n < len(rest) {
		out.Next = encodePageToken("c", &s, "", int64(rest[n-1].Round))
	}
	return out, nil
}

// A ListCompactions page token (pagetoken.go) holds the round of the
// page's last compaction: rounds only grow (a purge removes a whole session),
// so the next page starts right after it.

// Expanded is a message and a page of the originals it stands in for.
type Expanded struct {
	Message   chat.Message
	Originals []chat.Message
	// Next continues the originals; empty when none remain.
	Next string
}

// expandChunk is how many originals are read from the store at once.
const expandChunk = 64

// ExpandMessage returns the originals behind a summary or placeholder (a
// normal message has none: it is its own original), a page at a time: the
// message and its originals end at MaxResponseBytes (at least one original
// when any remain). Originals are read expandChunk at a time, so a call holds
// at most a page plus one chunk. Their token counts are for the session's
// model now (countForSession).
func (e *Engine) ExpandMessage(ctx context.Context, tenant, id, messageID, token string) (Expanded, error) {
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return Expanded{}, err
	}
	skip := 0
	if token != "" {
		n, err := decodePageToken(token, "x", &s, messageID)
		if err != nil || n == 0 || n > 1<<31 {
			return Expanded{}, chat.Invalid("page_token", "is not a token this server issued for ExpandMessage of this message")
		}
		skip = int(n)
	}
	msgs, err := e.store.MessagesByID(ctx, tenant, id, []string{messageID})
	if errors.Is(err, store.ErrNotFound) {
		return Expanded{}, fmt.Errorf("message %q: %w", messageID, store.ErrNotFound)
	}
	if err != nil {
		return Expanded{}, err
	}
	out := Expanded{Message: msgs[0]}
	ids := out.Message.Replaces
	if skip > len(ids) || (skip > 0 && skip == len(ids)) {
		return Expanded{}, chat.Invalid("page_token", "is not a token this server issued for this message")
	}
	limit := e.limits.MaxResponseBytes
	total := messageBytes(&out.Message)
	for i := skip; i < len(ids); i += expandChunk {
		chunk, err := e.store.MessagesByID(ctx, tenant, id, ids[i:min(i+expandChunk, len(ids))])
		if err != nil {
			return Expanded{}, err
		}
		for j := range chunk {
			total += messageBytes(&chunk[j])
			if limit > 0 && total > limit && len(out.Originals) > 0 {
				out.Next = encodePageToken("x", &s, messageID, int64(skip+len(out.Originals)))
				return out, e.countForSession(ctx, &s, &out)
			}
			out.Originals = append(out.Originals, chunk[j])
		}
	}
	return out, e.countForSession(ctx, &s, &out)
}

// countForSession sets the token counts of an expanded message and its
// originals for the session's model now: the log keeps the counts of the
// model a message was last counted for, which UpdateSession may have
// changed since. Only those whose key differs are counted (recountStale: a
// message the counter rejects keeps its stored count). Work: one count of
// the stale part of the page, in chunks within the count limits.
func (e *Engine) countForSession(ctx context.Context, s *store.Session, x *Expanded) error {
	key, err := e.countKey(s.Model)
	if err != nil {
		return err
	}
	all := append([]chat.Message{x.Message}, x.Originals...)
	counts := e.recountStale(ctx, s.Model, key, all)
	for i := range all {
		if n, ok := counts[all[i].ID]; ok {
			all[i].Tokens, all[i].CountedFor = n, key
		}
	}
	x.Message, x.Originals = all[0], all[1:]
	return nil
}

// compactionBytes estimates a compaction's encoded size as the API sends it
// (the view lists stay on the server): its ids, summary and items, plus a fixed allowance per item and id for framing and numbers.
func compactionBytes(c *store.Compaction) int {
	n := 128 + len(c.ID) + len(c.Summary)
	for _, t := range c.Tiers {
		n += len(t) + 4
	}
	for _, it := range c.Items {
		n += 48 + len(it.Tier) + len(it.NewID) + len(it.Reason)
		for _, s := range it.Replaced {
			n += len(s) + 4
		}
	}
	return n
}

// readPage reads up to size messages of a view after cursor `after` from
// the store, ending at CONTEXTD_MAX_RESPONSE_BYTES by the rows' stored
// sizes before any message is loaded (a page of 100 messages of 7 MB each
// once loaded 700 MB to answer 4); more says rows remain after them.
func (e *Engine) readPage(ctx context.Context, tenant, id string, view View, after int64, size int) (msgs []chat.Message, cursors []int64, more bool, err error) {
	read := e.store.ActiveSizes
	if view == ViewLog {
		read = e.store.LogSizes
	}
	rows, err := read(ctx, tenant, id, after, size+1)
	if err != nil || len(rows) == 0 {
		return nil, nil, false, err
	}
	n := min(size, len(rows))
	if limit := int64(e.limits.MaxResponseBytes); limit > 0 {
		total := int64(0)
		for i := range n {
			if total += rows[i].Bytes + 64; total > limit && i > 0 {
				n = i
				break
			}
		}
	}
	ids := make([]string, n)
	cursors = make([]int64, n)
	for i, r := range rows[:n] {
		ids[i], cursors[i] = r.ID, r.Cursor
	}
	if msgs, err = e.store.MessagesByID(ctx, tenant, id, ids); err != nil {
		return nil, nil, false, err
	}
	return msgs, cursors, n < len(rows), nil
}
