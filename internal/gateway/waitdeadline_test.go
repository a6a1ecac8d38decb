package gateway

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestTwinWaitsEndByTheRequestsDeadline: all the waits of one request
// (for a reply it carries, for a twin's call) end by one deadline, set
// where the request enters (waitsUntil of its arrival), however many
// times prepare's conflict loop runs identify. Here the request's
// deadline is spent (as by an earlier identify's wait on the same twin)
// and its twin's call never ends: the request goes on without waiting, in
// a session of its own. Before, each identify waited maxRecordWait from
// its own start, so a request matched again (a conflict, a session that
// moved) waited a minute more each time: here it waits on the twin until
// the test's watchdog ends its context, and fails.
func TestTwinWaitsEndByTheRequestsDeadline(t *testing.T) {
	g := newInProcess(t, nil)
	ctx := t.Context()
	first, sig := chatRequest(t, g, "", "user", "hello")
	was, _, _, err := g.prepare(ctx, "t", openAIChat{}, first, sig, g.waitsUntil(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	// The request extends the session; a call of its whole history (its
	// twin) is upstream in it and never ends.
	c, sig := chatRequest(t, g, "", "user", "hello", "assistant", "hi", "user", "more")
	twin := g.hold(ctx, "t", was.id, wholeHistory(c))
	defer twin.release()
	// The watchdog: the fix waits not at all; without it, a minute.
	watchdog, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, _, _, err := g.prepare(watchdog, "t", openAIChat{}, c, sig, time.Now())
	if err != nil {
		t.Fatalf("the request waited for its twin past its deadline (until its context ended): %v", err)
	}
	if res.id == was.id {
		t.Errorf("the request landed in %s, whose call is upstream", res.id)
	}
	select {
	case <-twin.pending:
		t.Fatal("the twin's call was released")
	default:
	}
}

// slowBody is a request body whose bytes come after delay (a slow upload),
// and which notes when its last byte was read.
type slowBody struct {
	delay time.Duration
	b     *bytes.Reader
	read  time.Time // when the last byte was read
}

func (s *slowBody) Read(p []byte) (int, error) {
	if s.delay > 0 {
		time.Sleep(s.delay) // the upload, not a synchronisation
		s.delay = 0
	}
	n, err := s.b.Read(p)
	if s.b.Len() == 0 && s.read.IsZero() {
		s.read = time.Now()
	}
	return n, err
}

// TestArrivedAfterTheBody: a request's work, and the one deadline of its
// waits (waitsUntil of x.arrived), begins when admit has read its body, not
// when its upload began: a body slower than the bound spent it before, so
// the request waited for no twin nor reply at all. Here admit reads a slow
// body; the request arrived when its last byte was in, not before. Without
// admit setting it (serveDoor set it after admit before; a stage moved
// ahead of the read would set it early) it is before the body.
func TestArrivedAfterTheBody(t *testing.T) {
	g := newInProcess(t, nil)
	body := &slowBody{delay: 10 * time.Millisecond,
		b: bytes.NewReader([]byte(`{"messages":[{"content":"hello","role":"user"}],"model":"gpt-4o"}`))}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", body).WithContext(t.Context())
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	x := &exchange{g: g, w: w, r: r, d: g.chat, shape: g.chat.shape()}
	if !x.admit() {
		t.Fatalf("admit refused the request: %d %s", w.Code, w.Body)
	}
	if body.read.IsZero() || x.arrived.Before(body.read) {
		t.Errorf("the request arrived at %v, before its body was read (%v)", x.arrived, body.read)
	}
}
