package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Admitting a JSON request body before it is decoded. A call in JSON
// (Connect with application/json or application/connect+json, gRPC-Web
// with +json, a Connect GET's message) is decoded by vanguard's codec
// (protojson) into the request before vanguard hands it to grpc-go as
// protobuf, so admitbody.go's wire walk came too late: protojson had
// allocated every element already (a million empty parts, "{}," each, were
// a million Part structs). The codec (jsonCodec in http.go) therefore
// first scans the JSON, token by token and allocating nothing per element,
// along the same plan as the wire walk, and refuses as it does (the same
// InvalidArgument naming the same field, with its BadRequest violation):
// a list or map over its cap, a request over its parts or tool calls.
//
// The scan is lenient where protojson is strict: what it cannot follow
// (malformed JSON, nesting past 100 levels, a key named twice) it passes
// on, and protojson refuses it as before. A field protojson meets twice is
// refused by protojson before its second value is decoded, so one list's
// elements are counted in one array. Well-known types (google.protobuf.*)
// have JSON forms of their own and are skipped, but for a FieldMask's
// string, whose comma-separated paths are counted.

// checkJSON scans data, the JSON of one message of type name; nil admits
// it. The error is a connect error vanguard answers in the caller's
// protocol.
func (c *bodyCaps) checkJSON(data []byte, name protoreflect.FullName) error {
	plan := c.types[name]
	if plan == nil {
		return nil
	}
	s := jsonScan{data: data}
	if err := s.value(plan, 0); err != nil && !errors.Is(err, errUnreadable) {
		return asConnectError(err)
	}
	return nil
}

// asConnectError is the gRPC status err as a connect error, details kept.
func asConnectError(err error) error {
	st := status.Convert(err)
	ce := connect.NewError(connect.Code(st.Code()), errors.New(st.Message()))
	for _, d := range st.Details() {
		if m, ok := d.(proto.Message); ok {
			if det, err := connect.NewErrorDetail(m); err == nil {
				ce.AddDetail(det)
			}
		}
	}
	return ce
}

// jsonScan is one pass over a JSON body; w keeps the path and the
// request-wide totals, as in the wire walk.
type jsonScan struct {
	data []byte
	i    int
	w    walk
}

// value scans a value of message type p: an object, or null.
func (s *jsonScan) value(p *wirePlan, depth int) error {
	if depth > maxWireDepth {
		return errUnreadable
	}
	if p.mask != nil && s.peek() == '"' {
		return s.maskPaths(p.mask)
	}
	if p.wellKnown || s.peek() != '{' {
		return s.skip()
	}
	if p.total >= 0 {
		if s.w.totals[p.total]++; s.w.totals[p.total] > p.totalMax {
			return s.w.tooManyTogether(p)
		}
	}
	s.i++ // {
	for n := int64(0); ; n++ {
		if done, err := s.next('}', n); done || err != nil {
			return err
		}
		raw, escaped, err := s.key()
		if err != nil {
			return err
		}
		var f *wireField
		if escaped {
			var k string
			if json.Unmarshal(raw, &k) != nil {
				return errUnreadable
			}
			f = p.byJSON[k]
		} else {
			f = p.byJSON[string(raw[1:len(raw)-1])] // no copy: a map index
		}
		switch {
		case f == nil:
			err = s.skip()
		case f.slot >= 0:
			err = s.items(f, depth)
		default: // a singular message field
			s.w.path = append(s.w.path, step{f.name, -1})
			err = s.value(f.sub, depth+1)
			s.w.path = s.w.path[:len(s.w.path)-1]
		}
		if err != nil {
			return err
		}
	}
}

// maskPaths moves past a field mask's JSON form, a string protojson
// splits on its commas (escaped ones too) into paths, refusing more paths
// than f allows.
func (s *jsonScan) maskPaths(f *wireField) error {
	start := s.i
	escaped, err := s.str()
	if err != nil {
		return err
	}
	raw := s.data[start:s.i]
	n := bytes.Count(raw, []byte{','}) + 1
	if escaped {
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return errUnreadable
		}
		n = strings.Count(v, ",") + 1
	}
	if f.max > 0 && int64(n) > f.max {
		return s.w.tooMany(f)
	}
	return nil
}

// key reads an object's key, quoted as it came, and its colon; escaped
// says the key has escapes (protojson matches the unescaped name).
func (s *jsonScan) key() (raw []byte, escaped bool, err error) {
	if s.peek() != '"' {
		return nil, false, errUnreadable
	}
	start := s.i
	if escaped, err = s.str(); err != nil {
		return nil, false, err
	}
	raw = s.data[start:s.i]
	if s.peek() != ':' {
		return nil, false, errUnreadable
	}
	s.i++
	return raw, escaped, nil
}

// items scans the value of the list or map field f, an array or an
// object of pairs, counting its items.
func (s *jsonScan) items(f *wireField, depth int) error {
	open, end, sub := byte('['), byte(']'), f.sub
	if f.isMap {
		open, end, sub = '{', '}', f.mapValue
	}
	if s.peek() != open {
		return s.skip() // null; anything else protojson refuses
	}
	s.i++
	for n := int64(0); ; n++ {
		if done, err := s.next(end, n); done || err != nil {
			return err
		}
		if f.max > 0 && n >= f.max {
			return s.w.tooMany(f)
		}
		if f.isMap {
			if _, _, err := s.key(); err != nil {
				return err
			}
		}
		var err error
		if sub != nil {
			s.w.path = append(s.w.path, step{f.name, n})
			err = s.value(sub, depth+1)
			s.w.path = s.w.path[:len(s.w.path)-1]
		} else {
			err = s.skip()
		}
		if err != nil {
			return err
		}
	}
}

// next moves past what comes before item n of an array or object that
// ends with end: done at its end, a comma before any item but the first.
func (s *jsonScan) next(end byte, n int64) (done bool, err error) {
	switch s.peek() {
	case end:
		s.i++
		return true, nil
	case ',':
		if n == 0 {
			return false, errUnreadable
		}
		s.i++
	default:
		if n > 0 {
			return false, errUnreadable
		}
	}
	return false, nil
}

// peek skips white space and returns the next byte (0 at the end).
func (s *jsonScan) peek() byte {
	for s.i < len(s.data) {
		switch c := s.data[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// str moves past the string at s.i, reporting whether it has escapes.
func (s *jsonScan) str() (escaped bool, err error) {
	for i := s.i + 1; i < len(s.data); i++ {
		switch s.data[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			s.i = i + 1
			return escaped, nil
		}
	}
	return false, errUnreadable
}

// skip moves past one value of no interest, however nested, without
// recursion.
func (s *jsonScan) skip() error {
	depth := 0
	for {
		switch c := s.peek(); c {
		case 0:
			return errUnreadable
		case '{', '[':
			depth++
			s.i++
			continue
		case '}', ']':
			if depth == 0 {
				return errUnreadable
			}
			depth--
			s.i++
		case ',', ':':
			if depth == 0 {
				return errUnreadable
			}
			s.i++
			continue
		case '"':
			if _, err := s.str(); err != nil {
				return err
			}
		default: // a number or a literal
			start := s.i
			for s.i < len(s.data) && !jsonDelim(s.data[s.i]) {
				s.i++
			}
			if s.i == start {
				return errUnreadable
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

func jsonDelim(c byte) bool {
	switch c {
	case ',', ':', '{', '}', '[', ']', '"', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}
