package engine

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// Pages of ListCompactions and ExpandMessage end at MaxResponseBytes, like
// those of GetMessages, so a session with many or large compactions, or a
// summary standing for megabytes of originals, reads within a default
// client's 4 MB receive limit.

// CompactionPage is a page of a session's compactions, oldest first.
type CompactionPage struct {
	Compactions []store.Compaction
	Next        string
}

// ListCompactions returns a page of a session's compactions, oldest first:
// it ends at page.Size (0: 100) compactions or MaxResponseBytes, whichever
// comes first, and holds at least one compaction when any remain. It reads
// one page (and one compaction more, to know whether others follow) from
// the store, wherever the page is in the listing.
func (e *Engine) ListCompactions(ctx context.Context, tenant, id string, page Page) (CompactionPage, error) {
	size := page.Size
	if size <= 0 {
		size = 100
	}
	var after *store.CompactionCursor
	if page.Token != "" {
		c, err := decodeCompactionCursor(page.Token)
		if err != nil {
			return CompactionPage{}, chat.Invalid("page_token", "is not a token this server issued for ListCompactions")
		}
		after = &c
	}
	if _, err := e.readSession(ctx, tenant, id); err != nil {
		return CompactionPage{}, err
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
		out.Next = encodeCompactionCursor(rest[n-1].CursorOf())
	}
	return out, nil
}

// A ListCompactions page token is the position of the page's last
// compaction: compactions are only ever added after the others (a purge
// removes a whole session), so the next page starts right after it.
func encodeCompactionCursor(c *store.CompactionCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte("c:" + strconv.FormatInt(c.CreatedAt.UnixNano(), 10) + ":" + strconv.Itoa(c.Round)))
}

func decodeCompactionCursor(token string) (store.CompactionCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	f := strings.Split(string(raw), ":")
	if err != nil || len(f) != 3 || f[0] != "c" {
		return store.CompactionCursor{}, errors.New("bad token")
	}
	at, err1 := strconv.ParseInt(f[1], 10, 64)
	round, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || round < 0 {
		return store.CompactionCursor{}, errors.New("bad token")
	}
	return store.CompactionCursor{CreatedAt: time.Unix(0, at).UTC(), Round: round}, nil
}

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
	skip := 0
	if token != "" {
		n, err := decodeOffset(token, "x")
		if err != nil || n == 0 {
			return Expanded{}, chat.Invalid("page_token", "is not a token this server issued for ExpandMessage")
		}
		skip = n
	}
	s, err := e.readSession(ctx, tenant, id)
	if err != nil {
		return Expanded{}, err
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
				out.Next = encodeOffset("x", skip+len(out.Originals))
				return out, e.countForSession(ctx, &s, &out)
			}
			out.Originals = append(out.Originals, chunk[j])
		}
	}
	return out, e.countForSession(ctx, &s, &out)
}

// countForSession sets the token counts of an expanded message and its
// originals for the session's model now: the log keeps the counts of the
// model a message was appended under, which UpdateSession may have changed
// since. Work: one count of the page, in chunks within the count limits.
func (e *Engine) countForSession(ctx context.Context, s *store.Session, x *Expanded) error {
	all := append([]chat.Message{x.Message}, x.Originals...)
	counted, err := e.recount(ctx, s.Model, all)
	if err != nil {
		return err
	}
	for i := range all {
		all[i].Tokens = counted[i].Tokens
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

func encodeOffset(kind string, n int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + strconv.Itoa(n)))
}

func decodeOffset(token, kind string) (int, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	k, num, ok := strings.Cut(string(raw), ":")
	n, perr := strconv.Atoi(num)
	if err != nil || !ok || k != kind || perr != nil || n < 0 {
		return 0, errors.New("bad token")
	}
	return n, nil
}
