package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/auth"
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

// TestWaitsDeadlineStartsWithTheRequestsWork: the one deadline of a
// request's waits is set when its body has been read, not when its upload
// began: a body slower than the bound spent it before, so the request
// waited for no twin nor reply at all. Here the request's twin is upstream
// (and stays) and its body takes longer than the bound to arrive: it
// waits for the twin the whole bound after its body, then goes on in a
// session of its own. Without the fix it waits not at all.
func TestWaitsDeadlineStartsWithTheRequestsWork(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"sure"},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":1,"total_tokens":21}}`)
	}))
	defer up.Close()
	g := newInProcess(t, nil)
	g.cfg.OpenAIBaseURL = up.URL
	g.recordWait = time.Second
	ctx := t.Context()
	first, sig := chatRequest(t, g, "", "user", "hello")
	tenant := auth.DefaultTenant // the doors' without keys
	was, _, _, err := g.prepare(ctx, tenant, openAIChat{}, first, sig, g.waitsUntil(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := chatRequest(t, g, "", "user", "hello", "assistant", "hi", "user", "more")
	twin := g.hold(ctx, tenant, was.id, wholeHistory(c))
	defer twin.release()
	body := &slowBody{delay: g.recordWait + g.recordWait/2,
		b: bytes.NewReader([]byte(`{"messages":[{"content":"hello","role":"user"},{"content":"hi","role":"assistant"},{"content":"more","role":"user"}],"model":"gpt-4o"}`))} // chatRequest's bytes
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", body).WithContext(ctx)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	waited := time.Since(body.read)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if waited < g.recordWait {
		t.Errorf("the request waited %v for its twin after its body, want its whole bound %v (the upload spent it)", waited.Round(time.Millisecond), g.recordWait)
	}
	if s := w.Header().Get(HeaderSession); s == "" || s == was.id {
		t.Errorf("the request went on in %q, want a session of its own (its twin's %s is busy)", s, was.id)
	}
}
