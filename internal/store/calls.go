package store

import "context"

// CallHit is a live session whose log holds a tool call, by its id.
type CallHit struct {
	SessionID string
	CallID    string
	// Position is the log position of the assistant message that made
	// the call.
	Position int64
}

// CallFinder looks sessions up by the tool calls their logs hold: a
// client that compacted its own history without naming its session keeps
// its latest calls, whose ids the provider made for that session
// (gateway/unsignalled.go).
type CallFinder interface {
	// FindCalls returns live sessions of the tenant whose logs hold one
	// of ids, at most limit rows per id (an id several sessions hold —
	// a provider that numbers its calls from 0 in every conversation —
	// costs limit rows, not one per session): at most len(ids)*limit in
	// all. Each id has its own rows, so a second session holding the
	// last id is read however many rows the ids before it have.
	FindCalls(ctx context.Context, tenant string, ids []string, limit int) ([]CallHit, error)
}

// ReadCallHits reads FindCalls' rows (session_id, call_id, position).
func ReadCallHits(rows Rows) ([]CallHit, error) {
	var out []CallHit
	for rows.Next() {
		var h CallHit
		if err := rows.Scan(&h.SessionID, &h.CallID, &h.Position); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}
