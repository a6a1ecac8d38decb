package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/tokens"
)

// newInProcess is a gateway over a real engine and embedded store, for
// tests that drive its stages in process (a request's identify and
// prepare, in an order the test sets) rather than through its HTTP doors
// (test/gateway). wrap, when set, wraps the store the engine uses (a
// test's hook into the order of writes).
func newInProcess(t *testing.T, wrap func(store.Store) store.Store) *Gateway {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	var s store.Store = st
	if wrap != nil {
		s = wrap(st)
	}
	return New(Config{Engine: engine.New(tokens.NewEncodings(), models, s), Models: models})
}

// chatRequest is a Chat Completions request of messages (role, content
// pairs) as admit and identify make it: its conversation, with its
// history chains, and its signal (session names X-Contextd-Session, "" for
// none).
func chatRequest(t *testing.T, g *Gateway, session string, messages ...string) (*conversation, signal) {
	t.Helper()
	var msgs []map[string]string
	for i := 0; i+1 < len(messages); i += 2 {
		msgs = append(msgs, map[string]string{"role": messages[i], "content": messages[i+1]})
	}
	b, err := json.Marshal(map[string]any{"model": "gpt-4o", "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(b))
	if session != "" {
		r.Header.Set(HeaderSession, session)
	}
	w := httptest.NewRecorder()
	rb, ok := g.readBody(w, r, shapeOpenAI)
	if !ok {
		t.Fatalf("the request was refused: %d %s", w.Code, w.Body)
	}
	d := openAIChat{}
	c, err := d.parse(rb)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signalOf("t", d.name(), r, rb.fields)
	if err != nil {
		t.Fatal(err)
	}
	historyChains(d.name(), sig, c)
	return c, sig
}
