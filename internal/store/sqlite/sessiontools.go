package sqlite

import (
	"context"

	"github.com/contextd/contextd/internal/store"
)

// A session's tools of toolsApart bytes or more (as stored text) live in
// the table session_tools (migration 00016), and the session row's tools
// column is then ”: SQLite rewrites a row whole, its overflow pages
// included, on any UPDATE, and a gateway request updates its session row
// twice while the tools — tens of KB of JSON with the real coding agents —
// rarely change. A call's txn remembers the tools text of each session it
// read or wrote, and writes session_tools only when the text differs from
// it (or when it never read the session): an unchanged tools list writes
// no page. Shorter tools stay in the row, where they cost less than a
// second table's lookup. A read is one statement (getSessionQuery reads
// session_tools in a subquery only for a row whose column is ”). A
// session's row in session_tools goes with the session (ON DELETE
// CASCADE, from a purge, a tenant's deletion or a deleted id reused):
// TestSessionToolsApart.
const toolsApart = 1024

// sessionToolsCol is the tools column of a row of sessions.
const sessionToolsCol = `CASE WHEN sessions.tools = '' THEN (SELECT t.tools FROM session_tools t
	WHERE t.tenant = sessions.tenant AND t.session_id = sessions.id) ELSE sessions.tools END`

type sessionKey struct{ tenant, id string }

// toolsInRow is what the session row's tools column holds for text.
func toolsInRow(text string) string {
	if len(text) >= toolsApart {
		return ""
	}
	return text
}

// sawTools remembers that the session's stored tools are text.
func (t *txn) sawTools(tenant, id, text string) {
	if t.tools == nil {
		t.tools = map[sessionKey]string{}
	}
	t.tools[sessionKey{tenant, id}] = text
}

// writeTools stores the session's tools text where it belongs, after its
// row was written with toolsInRow(text); fresh: the session was just
// inserted (nothing of it in session_tools).
func (t *txn) writeTools(ctx context.Context, s *store.Session, text string, fresh bool) error {
	prev, known := t.tools[sessionKey{s.Tenant, s.ID}]
	if fresh {
		prev, known = "", true
	}
	switch {
	case known && prev == text:
	case len(text) >= toolsApart:
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO session_tools (tenant, session_id, tools) VALUES (?, ?, ?)
			ON CONFLICT (tenant, session_id) DO UPDATE SET tools = excluded.tools`, s.Tenant, s.ID, text); err != nil {
			return err
		}
	case !known || len(prev) >= toolsApart:
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM session_tools WHERE tenant = ? AND session_id = ?`, s.Tenant, s.ID); err != nil {
			return err
		}
	}
	t.sawTools(s.Tenant, s.ID, text)
	return nil
}
