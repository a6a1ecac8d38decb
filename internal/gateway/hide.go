package gateway

import "strings"

// hiddenSession is an error about a session the caller may not be told
// (one a stranger's conversation made, found by the request's history):
// its text names "the conversation's session" instead, and errors.Is and
// errors.As still see what it wraps.
type hiddenSession struct {
	err  error
	text string
}

func (e *hiddenSession) Error() string { return e.text }
func (e *hiddenSession) Unwrap() error { return e.err }

// hideSession keeps res's id out of err's text unless the caller may see
// it (res.named), as the X-Contextd-Session header does.
func hideSession(err error, res resolved) error {
	if err == nil || res.named || res.id == "" || !strings.Contains(err.Error(), res.id) {
		return err
	}
	return &hiddenSession{err: err, text: strings.ReplaceAll(err.Error(), res.id, "(the conversation's session)")}
}

// owns: id is the signal's session or one of its own (forkID), which the
// caller may be told.
func (sig signal) owns(id string) bool {
	return sig.id != "" && (id == sig.id || strings.HasPrefix(id, sig.id+"~"))
}
