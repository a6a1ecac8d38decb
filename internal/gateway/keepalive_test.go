package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestKeepaliveNeverMixesJSONIntoAStream: once the ticker has begun the
// stream, whatever the handler writes is SSE: a JSON answer (however the
// handler's own check raced the ticker) becomes an error event and counts
// as not delivered; an error body becomes the shape's error event.
func TestKeepaliveNeverMixesJSONIntoAStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shape  wireShape
		status int
		body   string
		want   string // in the stream after the comments
		err    bool
	}{
		{name: "answer", shape: shapeOpenAI, status: http.StatusOK, body: `{"id":"chatcmpl-1","choices":[]}`,
			want: `{"code":null,"error":{"message":"contextd: the provider's answer could not be used","type":"server_error","code":null,"param":null},` +
				`"message":"contextd: the provider's answer could not be used","param":null,"type":"error"}`, err: true},
		{name: "openai error", shape: shapeOpenAI, status: http.StatusBadGateway, body: `{"error":{"message":"contextd: boom","type":"server_error","param":null,"code":"upstream_error"}}`,
			want: `{"code":"upstream_error","error":{"message":"contextd: boom","type":"server_error","code":"upstream_error","param":null},"message":"contextd: boom","param":null,"type":"error"}`},
		{name: "anthropic error", shape: shapeAnthropic, status: http.StatusInternalServerError, body: "{\n  \"type\": \"error\",\n  \"error\": {\"type\": \"api_error\", \"message\": \"boom\"}\n}",
			want: `{"type":"error","error":{"type":"api_error","message":"boom"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rec.Header().Set(HeaderSession, "s1")
			w, stop := startKeepalive(rec, tc.shape, time.Millisecond)
			for !streamStarted(w) {
				time.Sleep(time.Millisecond)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			_, err := w.Write([]byte(tc.body))
			stop()
			if tc.err != errors.Is(err, errNotStream) {
				t.Errorf("Write: %v", err)
			}
			got := rec.Body.String()
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" || rec.Header().Get(HeaderSession) != "s1" {
				t.Errorf("committed %d %v", rec.Code, rec.Header())
			}
			if !strings.HasPrefix(got, keepaliveComment) || !strings.HasSuffix(got, "event: error\ndata: "+tc.want+"\n\n") || strings.Contains(got, tc.body) {
				t.Errorf("stream:\n%s\nwant it to end with the error event\n%s", got, tc.want)
			}
		})
	}
}

// streamStarted reports whether w is a keepalive that has sent its headers
// early: what follows must be SSE.
func streamStarted(w http.ResponseWriter) bool {
	k, ok := w.(*keepalive)
	if !ok {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.byTicker
}
