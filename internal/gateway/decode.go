package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Decode: a request body is checked as JSON once, in one pass over its
// bytes, and split as it is checked into its top-level members and the
// elements of each member that is an array (messages, input, tools), all
// subslices of the body: nothing is copied, and no later step checks or
// splits the body again. encoding/json's Unmarshal checks its whole input
// before decoding it (checkValid), so the body unmarshalled into a map of
// raw members, the messages member into raw messages and each message into
// its struct went over the bytes five times or more; only the messages a
// door has not seen before (memo.go) are decoded now, each on its own.

// maxNesting is the deepest nesting of arrays and objects a body may have
// (encoding/json's own limit).
const maxNesting = 10000

// jsonScanner checks JSON text; i is the offset of the next byte.
type jsonScanner struct {
	b     []byte
	i     int
	depth int
	err   string // why the text is not JSON ("" while it is)
}

// scanBody checks body as a JSON object and splits it. The error names the
// member (and element) where the body stops being JSON.
func scanBody(body []byte) (*requestBody, error) {
	s := &jsonScanner{b: body}
	rb := &requestBody{raw: body, fields: map[string]json.RawMessage{}, arrays: map[string]scannedArray{}}
	s.ws()
	if s.peek() != '{' {
		return nil, s.fail("", "the body is not an object")
	}
	field := "" // where the body stopped being JSON, when known
	name, ok := s.object(func(q []byte) bool {
		key, err := memberName(q)
		if err != nil {
			s.err = "expected a member name"
			return false
		}
		vstart := s.i
		if s.peek() == '[' {
			// Only a conversation's elements are kept (conversational):
			// the other arrays (tools, include, stop) are checked, not
			// split, as no door reads their elements.
			var elems *[]json.RawMessage
			if conversational(key) {
				elems = &[]json.RawMessage{}
			}
			if at, ok := s.array(elems); !ok {
				field = key + "[" + strconv.Itoa(at) + "]"
				return false
			}
			if elems != nil {
				rb.arrays[key] = scannedArray{src: body[vstart:s.i:s.i], elems: *elems}
			}
		} else if !s.value() {
			field = key
			return false
		} else {
			delete(rb.arrays, key) // a member named twice: the last one counts
		}
		if _, dup := rb.fields[key]; !dup {
			rb.order = append(rb.order, key)
		}
		rb.fields[key] = body[vstart:s.i:s.i]
		return true
	})
	if !ok {
		if field == "" && name != nil {
			field, _ = memberName(name)
		}
		return nil, s.fail(field, s.err)
	}
	return rb, s.end()
}

// conversational reports whether a top-level member named key is a
// door's conversation (requestBody.array): messages (Chat Completions,
// Anthropic) or input (Responses).
func conversational(key string) bool { return key == "messages" || key == "input" }

// memberName is a member name's text (q quoted, checked).
func memberName(q []byte) (string, error) {
	for _, c := range q[1 : len(q)-1] {
		if c == '\\' {
			var k string
			err := json.Unmarshal(q, &k)
			return k, err
		}
	}
	return string(q[1 : len(q)-1]), nil
}

func (s *jsonScanner) fail(field, why string) error {
	where := ""
	if field != "" {
		where = field + ": "
	}
	if s.i >= len(s.b) {
		return fmt.Errorf("%sunexpected end of JSON", where)
	}
	return fmt.Errorf("%s%s at byte %d", where, why, s.i)
}

// end checks that only space follows the value.
func (s *jsonScanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return fmt.Errorf("text after the object at byte %d", s.i)
	}
	return nil
}

func (s *jsonScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *jsonScanner) expect(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value checks one value at s.i (space before it skipped by the caller).
func (s *jsonScanner) value() bool {
	switch c := s.peek(); {
	case c == '"':
		if !s.str() {
			return false
		}
		return true
	case c == '{':
		_, ok := s.object(nil)
		return ok
	case c == '[':
		_, ok := s.array(nil)
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	s.err = "expected a value"
	return false
}

func (s *jsonScanner) nest() bool {
	s.depth++
	if s.depth > maxNesting {
		s.err = "nested too deeply"
		return false
	}
	return true
}

// object checks the object at s.i. member, when set, takes each member's
// value (s.i at its start) in place of value, given the member's name (its
// quoted text). On failure, name is the member it failed in (nil: before
// one's name).
func (s *jsonScanner) object(member func(name []byte) bool) (name []byte, ok bool) {
	s.i++
	if !s.nest() {
		return nil, false
	}
	s.ws()
	if s.expect('}') {
		s.depth--
		return nil, true
	}
	for {
		s.ws()
		start := s.i
		if s.peek() != '"' || !s.str() {
			s.err = "expected a member name"
			return nil, false
		}
		name = s.b[start:s.i]
		s.ws()
		if !s.expect(':') {
			s.err = "expected ':' after a member name"
			return name, false
		}
		s.ws()
		if member != nil && !member(name) || member == nil && !s.value() {
			return name, false
		}
		s.ws()
		if s.expect(',') {
			continue
		}
		if s.expect('}') {
			s.depth--
			return nil, true
		}
		s.err = "expected ',' or '}' after a member"
		return name, false
	}
}

// array checks the array at s.i, collecting its elements into elems when
// set. On failure, at is the element it failed in.
func (s *jsonScanner) array(elems *[]json.RawMessage) (at int, ok bool) {
	s.i++
	if !s.nest() {
		return 0, false
	}
	s.ws()
	if s.expect(']') {
		s.depth--
		return 0, true
	}
	for n := 0; ; n++ {
		s.ws()
		start := s.i
		if !s.value() {
			return n, false
		}
		if elems != nil {
			*elems = append(*elems, s.b[start:s.i:s.i])
		}
		s.ws()
		if s.expect(',') {
			continue
		}
		if s.expect(']') {
			s.depth--
			return 0, true
		}
		s.err = "expected ',' or ']' after an element"
		return n, false
	}
}

// plainByte: bytes a string may hold as they are (not '"', '\\' or a
// control character).
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str checks a string at s.i (its opening quote).
func (s *jsonScanner) str() bool {
	b, i := s.b, s.i+1
	for {
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			s.i, s.err = i, "unexpected end of a string"
			return false
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return true
		case '\\':
			if i+1 >= len(b) {
				s.i, s.err = i, "unexpected end of a string"
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					s.i, s.err = i, "invalid \\u escape in a string"
					return false
				}
				i += 6
			default:
				s.i, s.err = i, "invalid escape in a string"
				return false
			}
		default:
			s.i, s.err = i, "control character in a string"
			return false
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (s *jsonScanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		s.err = "expected a value"
		return false
	}
	s.i += len(word)
	return true
}

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *jsonScanner) number() bool {
	b, i := s.b, s.i
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		s.i, s.err = i, "invalid number"
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			s.i, s.err = i, "invalid number"
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			s.i, s.err = i, "invalid number"
			return false
		}
	}
	s.i = i
	return true
}

// eachMember calls fn with the name and the value of each member of the
// JSON object raw (checked JSON: a part of a body scanBody took), in order;
// false when raw is not an object. Nothing is decoded but names with
// escapes.
func eachMember(raw []byte, fn func(name, value []byte)) bool {
	s := &jsonScanner{b: raw}
	s.ws()
	if s.peek() != '{' {
		return false
	}
	_, ok := s.object(func(q []byte) bool {
		name := q[1 : len(q)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			k, err := memberName(q)
			if err != nil {
				return false
			}
			name = []byte(k)
		}
		vstart := s.i
		if !s.value() {
			return false
		}
		fn(name, raw[vstart:s.i])
		return true
	})
	return ok
}

// stringValue decodes a member's value as encoding/json decodes it into a
// string (null: unchanged); false when it is another value.
func stringValue(v []byte, dst *string) bool {
	switch {
	case string(v) == "null":
		return true
	case len(v) == 0 || v[0] != '"':
		return false
	case bytes.IndexByte(v, '\\') < 0:
		*dst = string(v[1 : len(v)-1])
		return true
	}
	return json.Unmarshal(v, dst) == nil
}
