package gateway

import (
	"errors"
	"net/http"
	"time"
)

// DefaultStreamWriteTimeout is how long one write of an answer to the
// client may take when Config.StreamWriteTimeout is not set
// (CONTEXTD_STREAM_WRITE_TIMEOUT declares the setting).
const DefaultStreamWriteTimeout = 30 * time.Second

// deadlineWriter gives every write and flush of an answer a deadline
// (http.ResponseController.SetWriteDeadline): a client that stops reading
// for longer than the timeout has its connection cut, the write fails,
// the relay stops, and closing the upstream body cancels the provider's
// request. Without it, such a client held its handler, its goroutines and
// the upstream stream for ever. The deadline is per write (of at most
// writePiece bytes), so a long stream or a large answer read steadily is
// never cut.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// withWriteDeadlines wraps w; the returned func clears the deadline (the
// connection may serve another request) and must run when the handler
// ends.
func withWriteDeadlines(w http.ResponseWriter, timeout time.Duration) (http.ResponseWriter, func()) {
	if timeout <= 0 {
		return w, func() {}
	}
	d := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
	return d, func() {
		// What is still buffered goes out under the deadline too: once
		// the handler returns, net/http writes it with none, and a client
		// that stopped reading would hold the connection for ever.
		_ = d.FlushError()
		_ = d.rc.SetWriteDeadline(time.Time{})
	}
}

func (d *deadlineWriter) arm() { _ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout)) }

// writePiece is the most one deadline covers: an answer read whole (up
// to 64 MiB) is written in pieces, each with its own deadline, so a
// client that reads steadily over a slow link is never cut, however large
// the answer.
const writePiece = 64 << 10

func (d *deadlineWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		piece := p[:min(len(p), writePiece)]
		d.arm()
		m, err := d.ResponseWriter.Write(piece)
		n += m
		if err != nil {
			return n, err
		}
		p = p[len(piece):]
	}
	return n, nil
}

func (d *deadlineWriter) WriteHeader(code int) {
	d.arm()
	d.ResponseWriter.WriteHeader(code)
}

// FlushError is what http.ResponseController.Flush calls.
func (d *deadlineWriter) FlushError() error {
	d.arm()
	return d.rc.Flush()
}

func (d *deadlineWriter) Flush() { _ = d.FlushError() }

// Unwrap lets http.ResponseController reach the connection.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// flushed flushes what was written to the client and says whether that
// worked; false when the client is gone or did not read in time. A writer
// that cannot flush (the expand loop's buffer) is fine.
func flushed(rc *http.ResponseController) bool {
	err := rc.Flush()
	return err == nil || errors.Is(err, http.ErrNotSupported)
}
