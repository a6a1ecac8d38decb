package store

import (
	"cmp"
	"context"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// HistoryMetadata is the metadata key under which a message carries its
// place in a conversation's history: "<length>:<chain>", where length is
// how many client messages the history has up to and including this one
// and chain the hex of a rolling digest of them (each message's identity
// chained onto the prefix's). A message stored with it is indexed in the
// same transaction as its append (history_index), so the index never
// disagrees with the log: the gateway finds the session whose log is the
// longest prefix of a request in one indexed read per message it checks.
const HistoryMetadata = "contextd.history"

// HistoryHit is a session that holds a history chain.
type HistoryHit struct {
	Chain     string
	SessionID string
	// Length is the chain's length (client messages up to it).
	Length int64
	// Head: the chain is the session's newest, so the session's log is
	// exactly that history.
	Head bool
}

// HistoryEntry is one message's place in the history index.
type HistoryEntry struct {
	Length int64
	Chain  string
}

// HistoryOf reads the history entry a message carries (ok false when it
// has none, is not an original in the log, or the value is malformed).
// Placeholders and summaries keep their original's metadata but are not
// part of the client's history.
func HistoryOf(m *chat.Message) (HistoryEntry, bool) {
	v, ok := m.Metadata[HistoryMetadata]
	if !ok || m.Position <= 0 || m.Kind != "" && m.Kind != chat.KindNormal {
		return HistoryEntry{}, false
	}
	l, c, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(l, 10, 64)
	if !ok || err != nil || n <= 0 || len(c) != 32 {
		return HistoryEntry{}, false
	}
	if _, err := hex.DecodeString(c); err != nil {
		return HistoryEntry{}, false
	}
	return HistoryEntry{Length: n, Chain: c}, true
}

// HistoryEntries is what msgs add to the index, in order, and the last
// (the session's new head).
func HistoryEntries(msgs []chat.Message) []HistoryEntry {
	var out []HistoryEntry
	for i := range msgs {
		if e, ok := HistoryOf(&msgs[i]); ok {
			out = append(out, e)
		}
	}
	return out
}

// HistoryFinder looks conversations up by their history.
type HistoryFinder interface {
	// FindHistory returns live sessions of the tenant that hold one of
	// chains, heads first, at most limit (limit bounds the work of a
	// chain many sessions share).
	// Each chain reads at most limit rows, however many sessions share it.
	FindHistory(ctx context.Context, tenant string, chains []string, limit int) ([]HistoryHit, error)
}

// OrderHistoryHits orders hits as FindHistory returns them (heads first,
// the longest first) and keeps at most limit.
func OrderHistoryHits(hits []HistoryHit, limit int) []HistoryHit {
	slices.SortStableFunc(hits, func(a, b HistoryHit) int {
		if a.Head != b.Head {
			if a.Head {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.Length, a.Length)
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}
