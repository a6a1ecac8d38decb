package gateway

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// signal is what a request itself says about its conversation, read in
// this order (the first one present wins):
//
//	X-Contextd-Session                     the session, by its id
//	X-Claude-Code-Session-Id               Claude Code's session
//	metadata.user_id's session             Claude Code (JSON {"session_id"} or "..._session_<uuid>")
//	Session_id, Session-Id, Conversation_id, Thread-Id   Codex CLI's conversation
//	prompt_cache_key, safety_identifier, user            OpenAI: a grouping hint
//	metadata.user_id (no session in it)    Anthropic: a grouping hint
//
// A session signal names a session of its own: its id is derived from the
// tenant, the door and the signal (or is X-Contextd-Session's value), so a
// signal never reaches another tenant's or another door's sessions. A
// grouping hint names no session: it only keeps the conversations of
// different hints apart, and the history index finds the session within
// the hint. Every signal scopes the history chains (chainStart), so
// conversations of different signals never meet.
type signal struct {
	// id is the session a session signal names ("" for a hint or none).
	id string
	// scope is mixed into the history chains ("" with no signal).
	scope string
	// explicit: the client named the session itself (X-Contextd-Session).
	explicit bool
}

var sessionHeaderPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~-]{0,127}$`)

// maxSignalBytes bounds a signal's value (longer ones are refused as bad
// input, so a hash is never the only thing standing between two ids).
const maxSignalBytes = 512

// signalOf reads the request's signal; an error is bad input (400).
func signalOf(tenant, door string, r *http.Request, fields map[string]json.RawMessage) (signal, error) {
	if v := r.Header.Get(HeaderSession); v != "" {
		if !sessionHeaderPattern.MatchString(v) {
			return signal{}, fmt.Errorf("%s: must be 1 to 128 letters, digits, '.', '_', '~' or '-', starting with a letter or digit", HeaderSession)
		}
		return signal{id: v, scope: "session:" + v, explicit: true}, nil
	}
	session := func(kind, v string) signal {
		return signal{id: "gw-" + kind + "-" + signalDigest(tenant, door, kind, v), scope: kind + ":" + v}
	}
	hint := func(kind, v string) signal { return signal{scope: kind + ":" + v} }
	if v := r.Header.Get("X-Claude-Code-Session-Id"); usable(v) {
		return session("cc", v), nil
	}
	userID := stringField(fields["metadata"], "user_id")
	if v := claudeCodeSession(userID); usable(v) {
		return session("cc", v), nil
	}
	for _, h := range []string{"Session_id", "Session-Id", "Conversation_id", "Thread-Id"} {
		if v := r.Header.Get(h); usable(v) {
			return session("cx", v), nil
		}
	}
	for _, f := range []string{"prompt_cache_key", "safety_identifier", "user"} {
		var v string
		if json.Unmarshal(fields[f], &v) == nil && usable(v) {
			return hint(f, v), nil
		}
	}
	if usable(userID) {
		return hint("user_id", userID), nil
	}
	return signal{}, nil
}

func usable(v string) bool { return v != "" && len(v) <= maxSignalBytes }

// signalDigest names a signal's session: the tenant, the door, the kind
// and the value.
func signalDigest(tenant, door, kind, v string) string {
	h := sha256.New()
	for _, s := range []string{"contextd-signal-v1", tenant, door, kind, v} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return encodeID(h.Sum(nil))
}

// stringField is the string at key in a JSON object ("" otherwise).
func stringField(obj json.RawMessage, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return ""
	}
	var s string
	_ = json.Unmarshal(m[key], &s)
	return s
}

var legacyClaudeCodeUser = regexp.MustCompile(`_session_([0-9A-Fa-f-]{8,64})$`)

// claudeCodeSession is the session in Claude Code's metadata.user_id: a
// JSON object {"device_id", "account_uuid", "session_id"} (2.1.x), or
// "user_<hash>_account_<uuid>_session_<uuid>" (earlier versions).
func claudeCodeSession(userID string) string {
	if strings.HasPrefix(userID, "{") {
		return stringField(json.RawMessage(userID), "session_id")
	}
	if m := legacyClaudeCodeUser.FindStringSubmatch(userID); m != nil {
		return m[1]
	}
	return ""
}
