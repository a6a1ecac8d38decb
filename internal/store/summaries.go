package store

import "context"

// SummaryFinder looks sessions up by the summary a client compacted its
// history with: the gateway records, for a session, the digest of the
// answer it gave to the session's summary request (an aside without a
// signal), and a compacted history that keeps no call is looked up by the
// digest of the summary it starts with (gateway/unsignalledsummary.go).
// Every replica reads the same records, and they outlive a restart.
type SummaryFinder interface {
	// RecordSummary records sum as the latest summary session answered:
	// one row per session, gone when the session is purged (or its id
	// made again). A record replaces the session's only when it is newer
	// (SummaryRecord: newer by version, then seq): the record of an older answer that lands
	// late (its write was slower, or its replica's) leaves the newer one.
	RecordSummary(ctx context.Context, tenant, sessionID string, sum SummaryRecord) error
	// FindSummaries returns sessions of the tenant, live or deleted (not
	// yet purged: a deleted session's client may go on), whose latest
	// summary's digest is one of digests, at most limit rows per digest
	// (a caller that needs one session asks for 2: a second tells that
	// the digest is not one session's).
	FindSummaries(ctx context.Context, tenant string, digests []string, limit int) ([]SummaryHit, error)
}

// SummaryRecord is a summary a session answered, in the order of the
// session's requests: Version is the session's version when the request
// that asked for it was resolved, Seq the request's arrival (Unix
// nanoseconds, the gateway's clock), which orders two requests of one
// version (a summary request stores nothing, so several can share one).
// Across replicas Seq is as good as their clocks' agreement: two requests
// of one version closer in time than the replicas' clocks differ may be
// ordered the wrong way (docs/gateway.md).
//
// A record is newer than another when its Version is higher, or its
// Version is the same and its Seq higher; both stores replace a session's
// record only with a newer one, in their upsert's condition (a row
// comparison of (version, seq)).
type SummaryRecord struct {
	Digest  string
	Version int64
	Seq     int64
}

// SummaryHit is a session whose latest summary has Digest; Live unless it
// was deleted.
type SummaryHit struct {
	SessionID string
	Digest    string
	Live      bool
}

// ReadSummaryHits reads FindSummaries' rows (session_id, digest, live).
func ReadSummaryHits(rows Rows) ([]SummaryHit, error) {
	var out []SummaryHit
	for rows.Next() {
		var h SummaryHit
		if err := rows.Scan(&h.SessionID, &h.Digest, &h.Live); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}
