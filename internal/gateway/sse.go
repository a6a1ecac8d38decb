package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxEventBytes bounds one SSE event.
const maxEventBytes = 16 << 20

// sseReader reads an SSE answer event by event, as it arrives, for relay
// (to the client) and roundTrip (into the expand loop's buffer).
type sseReader struct {
	br             *bufio.Reader
	ev, long, data []byte // the event's bytes, a line longer than br's buffer, its data
	name           string
	hasData        bool
}

// sseEnd says how next ended.
type sseEnd int

const (
	sseWhole sseEnd = iota // a whole event, up to its blank line
	sseRest                // the end of the body (or the connection dropped): what is left, to pass on as it came
	sseCut                 // a malformed stream (an event or line over maxEventBytes): cut, as the network would
)

func newSSEReader(body io.Reader) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(body, 64<<10)}
}

// next reads the next event: its bytes as they came (valid until the next
// call), its name and data; fields is false for an event that has neither
// (blank lines).
func (s *sseReader) next() (ev sseEvent, fields bool, end sseEnd) {
	s.ev, s.data, s.name, s.hasData = s.ev[:0], s.data[:0], "", false
	for {
		chunk, err := s.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			s.long = append(s.long, chunk...)
			if len(s.long)+len(s.ev) > maxEventBytes {
				return sseEvent{}, false, sseCut
			}
			continue
		}
		line := chunk
		if len(s.long) > 0 {
			s.long = append(s.long, chunk...)
			line, s.long = s.long, s.long[:0]
		}
		if len(line) == 0 {
			return sseEvent{raw: s.ev}, false, sseRest
		}
		s.ev = append(s.ev, line...)
		if len(s.ev) > maxEventBytes {
			return sseEvent{}, false, sseCut
		}
		text := bytes.TrimRight(line, "\r\n")
		if err == nil && len(text) == 0 {
			return sseEvent{raw: s.ev, name: s.name, data: s.data}, s.hasData || s.name != "", sseWhole
		}
		switch {
		case bytes.HasPrefix(text, []byte("event:")):
			s.name = string(bytes.TrimSpace(text[len("event:"):]))
		case bytes.HasPrefix(text, []byte("data:")):
			v := text[len("data:"):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			if s.hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, v...)
			s.hasData = true
		}
		if err != nil {
			return sseEvent{raw: s.ev}, false, sseRest
		}
	}
}

// follow shows st one event: whether to pass it on, whether it is the
// stream's last, and its bytes for the client (a streamer may rewrite its
// data, eventRewriter).
func follow(st streamer, ev sseEvent, fields bool) (raw []byte, pass, last bool) {
	if !fields {
		return ev.raw, true, false
	}
	pass, last = st.event(ev.name, ev.data)
	raw = ev.raw
	if rw, ok := st.(eventRewriter); ok {
		if data := rw.clientEvent(ev.data); data != nil {
			raw = eventBytes(ev.name, data)
		}
	}
	return raw, pass, last
}

// eventBytes writes an SSE event; data holds no newline.
func eventBytes(name string, data []byte) []byte {
	out := make([]byte, 0, len(name)+len(data)+16)
	if name != "" {
		out = append(append(append(out, "event: "...), name...), '\n')
	}
	out = append(append(out, "data: "...), data...)
	return append(out, "\n\n"...)
}

func isEventStream(ct string) bool {
	return len(ct) >= len("text/event-stream") && ct[:len("text/event-stream")] == "text/event-stream"
}
