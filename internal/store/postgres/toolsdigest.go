package postgres

import (
	"crypto/sha256"
	"sync"
)

// A session row's tools column is tens of KB of JSON with a coding agent's
// tools (about 60 KB for 30), and a gateway request reads the row three
// times (the match's read, and each transaction's lock): each time the
// server detoasted the column and sent it, and the client received and
// compared it. The row carries the digest of its tools (migration 00018,
// written with them), and a read of the row sends the digest of the tools
// this replica last saw on that session's row: the server sends the
// column only when the row's digest differs (sessionCols), and the replica
// takes the text it holds otherwise. The digest this replica remembers is
// only a guess, checked by the server on every read: a guess that is
// stale (another replica changed the tools, a transaction that wrote them
// rolled back) or forgotten costs the column's transfer, never a wrong
// answer. The digest counts only when it was written at the row's version
// (tools_digest_version): a replica of the code before migration 00018
// (a rolling upgrade) writes the tools with a new version and leaves the
// digest, so its rows are read whole until this code updates them: an
// update that leaves the tools column out (heldTools) writes the digest of
// the tools the locked row holds when the row's did not count, and never
// makes a digest of an older version count (it is of other tools:
// TestToolsDigestOfAnOlderWriter).
// A row whose digest is NULL never matches.
//
// Bounds: texts shorter than toolsHintMin are not worth it (sent each
// time); the texts kept are at most toolsHintBytes (each at most
// toolsHintMax, so that one session's cannot wipe everyone's), a text is
// kept once whatever the sessions that share it, and at most
// toolsHintSessions sessions are remembered, their keys (tenant and id,
// which a client chooses) and digests at most toolsHintKeyBytes; past a
// bound, the set starts over. One set per process (like the store's tools codec): the stores of
// two replicas in one process share guesses, which is as safe as any.
const (
	toolsHintMin      = 1024
	toolsHintBytes    = 8 << 20
	toolsHintMax      = toolsHintBytes / 4
	toolsHintSessions = 1 << 16
	toolsHintKeyBytes = 4 << 20
)

var toolsHints = struct {
	mu        sync.Mutex
	bySession map[string]string // tenant NUL id → digest
	byDigest  map[string]string // digest → text
	bytes     int
	keyBytes  int // bySession's keys and digests
}{}

// toolsHint is a session's tools as this replica last saw them.
type toolsHint struct{ digest, text string }

// arg is the digest as a statement's argument (nil: none held).
func (h toolsHint) arg() any {
	if h.digest == "" {
		return nil
	}
	return []byte(h.digest)
}

func hintKey(tenant, id string) string { return tenant + "\x00" + id }

// toolsHintOf returns the tools this replica last saw on the session's
// row, if it still holds them.
func toolsHintOf(tenant, id string) toolsHint {
	toolsHints.mu.Lock()
	defer toolsHints.mu.Unlock()
	d, ok := toolsHints.bySession[hintKey(tenant, id)]
	if !ok {
		return toolsHint{}
	}
	text, ok := toolsHints.byDigest[d]
	if !ok {
		return toolsHint{}
	}
	return toolsHint{digest: d, text: text}
}

// sawTools remembers that the session's row has the tools text whose
// digest is digest. ofText says the caller took digest of text itself;
// otherwise digest is the row's, and the texts are kept by digest for
// every session of every tenant: a row whose digest is not of its tools
// (a writer that broke the column's rule) must not put its text under
// another's digest, so a text not yet kept is kept only if digest is its
// SHA-256 (taken on a miss only: a row's tools sent), and a text already
// kept under digest is the session's only if it is that text.
func sawTools(tenant, id, digest, text string, ofText bool) {
	if len(text) < toolsHintMin || len(text) > toolsHintMax || digest == "" {
		return
	}
	toolsHints.mu.Lock()
	kept, ok := toolsHints.byDigest[digest]
	toolsHints.mu.Unlock()
	if ok && kept != text || !ok && !ofText && toolsDigest(text) != digest {
		return
	}
	toolsHints.mu.Lock()
	defer toolsHints.mu.Unlock()
	if _, ok := toolsHints.byDigest[digest]; !ok {
		if toolsHints.byDigest == nil || toolsHints.bytes+len(text) > toolsHintBytes {
			toolsHints.byDigest, toolsHints.bytes = map[string]string{}, 0
			toolsHints.bySession, toolsHints.keyBytes = map[string]string{}, 0
		}
		toolsHints.byDigest[digest] = text
		toolsHints.bytes += len(text)
	}
	key := hintKey(tenant, id)
	if _, ok := toolsHints.bySession[key]; !ok {
		cost := len(key) + len(digest)
		if cost > toolsHintKeyBytes/4 {
			return // an id that long would wipe everyone's
		}
		if len(toolsHints.bySession) >= toolsHintSessions || toolsHints.keyBytes+cost > toolsHintKeyBytes {
			toolsHints.bySession, toolsHints.keyBytes = map[string]string{}, 0
		}
		toolsHints.keyBytes += cost
	}
	toolsHints.bySession[key] = digest
}

// toolsDigest is the digest the row keeps of its tools text: SHA-256 of
// its UTF-8 bytes (sha256(convert_to(tools, 'UTF8')) in SQL).
func toolsDigest(text string) string {
	d := sha256.Sum256([]byte(text))
	return string(d[:])
}
