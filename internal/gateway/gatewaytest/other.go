package gatewaytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// other answers every path the fake has no door for (batches, embeddings,
// GET /v1/responses/{id}, ...), as the provider's other endpoints would:
// it records the request and answers what it got (method, path, query and
// body size) with a header of its own; with ?stream=true it answers three
// SSE events instead.
func (f *Fake) other(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.requests = append(f.requests, Request{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Raw: raw})
	f.mu.Unlock()
	w.Header().Set("X-Fake-Endpoint", r.Method+" "+r.URL.Path)
	if r.URL.Query().Get("stream") == "true" {
		s := f.startSSE(w, -1, Bill{})
		for i := range 3 {
			s.event("", map[string]any{"n": i})
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = fmt.Fprintf(w, `{"method":%q,"path":%q,"query":%q,"bytes":%d}`, r.Method, r.URL.Path, r.URL.RawQuery, len(raw))
}
