package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"
)

// keepalive stands in for the ResponseWriter of a streamed request while
// the expand loop holds its answer (expandloop.go). Each round is read
// whole before a byte goes out, so a client (or a proxy between) with an
// idle timeout would see nothing for as long as the rounds take. When the
// loop has held the answer for `every`, keepalive sends the headers (200,
// text/event-stream, contextd's headers as they were when the loop began)
// and then an SSE comment line every `every`, which SSE readers ignore.
// Once it has done so:
//   - the final round's events follow on the same stream (its headers, and
//     X-Contextd-Expand-Rounds, can no longer be sent);
//   - an error (contextd's, or the provider's relayed) goes out as an error
//     event in the provider's stream shape (streamErrorEvent), which the
//     SDKs raise as they would the provider's own.
//
// Until then it passes everything through untouched, so a loop faster than
// `every` answers exactly as without it.
type keepalive struct {
	w     http.ResponseWriter
	shape wireShape
	// header is the handler's header map (its goroutine only); early is
	// what an early commit sends, copied before the ticker starts.
	header http.Header
	early  http.Header

	mu        sync.Mutex
	committed bool // the headers are out
	byTicker  bool // they went out early, from the ticker
	status    int  // the handler's status after an early commit
	stopped   bool
	done      chan struct{}
	exited    chan struct{}
}

// keepaliveComment is the line sent to keep a held stream alive.
const keepaliveComment = ": contextd: working\n\n"

// startKeepalive wraps w for a streamed request whose answer the loop
// holds; every <= 0 turns it off (w is returned as it is, stop does
// nothing).
func startKeepalive(w http.ResponseWriter, shape wireShape, every time.Duration) (http.ResponseWriter, func()) {
	if every <= 0 {
		return w, func() {}
	}
	k := &keepalive{w: w, shape: shape, header: w.Header().Clone(), early: w.Header().Clone(),
		done: make(chan struct{}), exited: make(chan struct{})}
	k.early.Set("Content-Type", "text/event-stream")
	k.early.Set("Cache-Control", "no-cache")
	k.early.Del("Content-Length")
	go k.tick(every)
	return k, k.stop
}

func (k *keepalive) tick(every time.Duration) {
	defer close(k.exited)
	t := time.NewTicker(every)
	defer t.Stop()
	rc := http.NewResponseController(k.w)
	for {
		select {
		case <-k.done:
			return
		case <-t.C:
		}
		k.mu.Lock()
		if k.stopped || k.committed && (!k.byTicker || k.status != 0) {
			k.mu.Unlock()
			return // the handler answered: nothing more of ours
		}
		if !k.committed {
			h := k.w.Header()
			clear(h)
			for name, v := range k.early {
				h[name] = v
			}
			k.w.WriteHeader(http.StatusOK)
			k.committed, k.byTicker = true, true
		}
		_, err := k.w.Write([]byte(keepaliveComment))
		if err == nil {
			err = rc.Flush()
		}
		k.mu.Unlock()
		if err != nil {
			return // the client went away: the request's context ends the loop
		}
	}
}

// stop ends the ticker and waits for it: after it the handler may return.
func (k *keepalive) stop() {
	k.mu.Lock()
	k.stopped = true
	k.mu.Unlock()
	close(k.done)
	<-k.exited
}

func (k *keepalive) Header() http.Header { return k.header }

// commitAnswer sends the headers of a 200 answer to w, SSE or not; false
// when w is a keepalive that has begun the stream and the answer is not
// SSE, which then cannot follow (nothing is written: the caller answers an
// error). The check and the commit are one step under the lock the ticker
// commits under, so it cannot begin the stream in between.
func commitAnswer(w http.ResponseWriter, sse bool) bool {
	k, ok := w.(*keepalive)
	if !ok {
		w.WriteHeader(http.StatusOK)
		return true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byTicker && !sse {
		return false
	}
	k.writeHeader(http.StatusOK)
	return true
}

func (k *keepalive) WriteHeader(status int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writeHeader(status)
}

func (k *keepalive) writeHeader(status int) {
	if k.committed {
		if k.byTicker && k.status == 0 {
			k.status = status
		}
		return
	}
	h := k.w.Header()
	clear(h)
	for name, v := range k.header {
		h[name] = v
	}
	k.w.WriteHeader(status)
	k.committed, k.status = true, status
}

func (k *keepalive) Write(b []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writeHeader(http.StatusOK) // no-op when the handler set its status
	switch {
	case !k.byTicker:
		return k.w.Write(b)
	case k.status != http.StatusOK:
		// An error after the stream began: as the provider's error event.
		if _, err := k.w.Write(streamErrorEvent(k.shape, b)); err != nil {
			return 0, err
		}
		return len(b), nil
	case !isEventStream(k.header.Get("Content-Type")):
		// An answer that is not a stream (decided here, under the lock the
		// ticker commits under): an error event, and the answer counts as
		// not delivered.
		_, _ = k.w.Write(streamErrorEvent(k.shape, nil))
		return 0, errNotStream
	}
	return k.w.Write(b)
}

// errNotStream: an answer that is not SSE cannot follow the stream's start.
var errNotStream = errors.New("the answer is not a stream and the stream had begun")

// FlushError lets http.ResponseController flush through the wrapper.
func (k *keepalive) FlushError() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return http.NewResponseController(k.w).Flush()
}

// streamErrorEvent is an error body (contextd's from writeError, or the
// provider's) as the error event of the shape's streams: Anthropic's
// `event: error` with the error body itself; for OpenAI the Responses
// stream's error event (type, code, message, param) that also keeps the
// `error` object, which both OpenAI SDKs raise on in any stream. A body
// that is not a JSON error is replaced by a neutral one.
func streamErrorEvent(shape wireShape, body []byte) []byte {
	var parsed struct {
		Error *errorObject `json:"error"`
	}
	var data bytes.Buffer
	if json.Unmarshal(body, &parsed) != nil || parsed.Error == nil {
		parsed.Error = &errorObject{Message: "contextd: the provider's answer could not be used", Type: "api_error"}
		if shape == shapeOpenAI {
			parsed.Error.Type = "server_error"
		}
	} else if shape == shapeAnthropic && json.Compact(&data, body) == nil {
		return errorEvent(data.Bytes()) // the provider's (or writeError's) own body
	}
	e := parsed.Error
	if len(e.Code) == 0 {
		e.Code = json.RawMessage("null")
	}
	if len(e.Param) == 0 {
		e.Param = json.RawMessage("null")
	}
	var b []byte
	if shape == shapeAnthropic {
		b, _ = json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": e.Type, "message": e.Message}})
	} else {
		b, _ = json.Marshal(map[string]any{"type": "error", "code": e.Code, "message": e.Message, "param": e.Param, "error": e})
	}
	return errorEvent(b)
}

// errorObject is the error object of both providers' error bodies (OpenAI
// sets all four fields, Anthropic type and message).
type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code,omitempty"`
	Param   json.RawMessage `json:"param,omitempty"`
}

// errorEvent is an SSE error event; data holds no newline.
func errorEvent(data []byte) []byte {
	out := make([]byte, 0, len(data)+24)
	out = append(out, "event: error\ndata: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}
