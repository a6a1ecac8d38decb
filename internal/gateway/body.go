package gateway

import (
	"encoding/json"
	"io"
	"slices"
)

// requestBody is a request's JSON object as the client sent it, checked
// and split once (scanBody), and what the gateway changes in it before it
// goes upstream. Its members are subslices of raw: a door reads them,
// replaces the few it rewrites (fields), and has the conversation's array
// written from pieces (splice) — the client's own bytes of every message
// that goes as it came, the gateway's for the rest — so the body to
// forward is assembled once, by encode, in one buffer of its final size.
type requestBody struct {
	raw []byte
	// fields are the top-level members (the last one of a name counts);
	// order is their order in raw (encode keeps it, then adds new members).
	fields map[string]json.RawMessage
	order  []string
	// arrays are the elements of the conversation's member (messages or
	// input: conversational) when raw holds it as an array.
	arrays map[string]scannedArray
	// spliced are the members encode writes as an array of these elements
	// instead of their value in fields.
	spliced map[string][]json.RawMessage
}

// scannedArray is an array member as the scan found it: its value (src)
// and its elements.
type scannedArray struct {
	src   json.RawMessage
	elems []json.RawMessage
}

// array is the elements of member key when it is an array; ok is false
// when it is absent or another value. Elements of the conversation's
// member as raw holds it come from the one scan; another member, or one
// the gateway replaced, is split anew.
func (b *requestBody) array(key string) ([]json.RawMessage, bool) {
	v, ok := b.fields[key]
	if !ok {
		return nil, false
	}
	if a, ok := b.arrays[key]; ok && len(v) == len(a.src) && len(v) > 0 && &v[0] == &a.src[0] {
		return a.elems, true
	}
	var elems []json.RawMessage
	if json.Unmarshal(v, &elems) != nil || elems == nil {
		return nil, false
	}
	return elems, true
}

// splice has member key written as an array of elems (each a JSON value
// the gateway checked or wrote); nil elems drop the splice.
func (b *requestBody) splice(key string, elems []json.RawMessage) {
	if b.spliced == nil {
		b.spliced = map[string][]json.RawMessage{}
	}
	if elems == nil {
		delete(b.spliced, key)
		return
	}
	b.spliced[key] = elems
}

// encode writes the body to forward: the members in the client's order,
// then those the gateway added (sorted), each once.
func (b *requestBody) encode() []byte {
	keys := make([]string, 0, len(b.fields))
	seen := make(map[string]bool, len(b.order))
	for _, k := range b.order {
		if _, ok := b.fields[k]; ok && !seen[k] {
			keys = append(keys, k)
			seen[k] = true
		}
	}
	if len(keys) < len(b.fields) {
		var added []string
		for k := range b.fields {
			if !seen[k] {
				added = append(added, k)
			}
		}
		slices.Sort(added)
		keys = append(keys, added...)
	}
	n := 2
	for _, k := range keys {
		n += len(k) + 8
		if elems, ok := b.spliced[k]; ok {
			n += 2 + len(elems)
			for _, e := range elems {
				n += len(e)
			}
			continue
		}
		n += len(b.fields[k])
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendName(out, k)
		out = append(out, ':')
		if elems, ok := b.spliced[k]; ok {
			out = append(out, '[')
			for j, e := range elems {
				if j > 0 {
					out = append(out, ',')
				}
				out = append(out, e...)
			}
			out = append(out, ']')
			continue
		}
		out = append(out, b.fields[k]...)
	}
	return append(out, '}')
}

// appendName appends a member name as a JSON string.
func appendName(out []byte, k string) []byte {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			q, _ := json.Marshal(k)
			return append(out, q...)
		}
	}
	out = append(out, '"')
	out = append(out, k...)
	return append(out, '"')
}

// readAll reads r whole into one buffer of the announced size (n, when
// the client sent Content-Length and it is within limit), so a body is
// not copied as a growing buffer doubles. What a request holds follows
// what arrived, not what it announced: the buffer starts at most
// preallocBytes and doubles (up to n) only as it fills, so a client that
// announces the limit and sends slowly, or nothing, holds at most
// preallocBytes or twice what it sent.
func readAll(r io.Reader, n, limit int64) ([]byte, error) {
	if n <= 0 || n > limit {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, min(n+1, preallocBytes)) // +1: the read that finds the end
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			if int64(cap(b)) < n+1 {
				b = slices.Grow(b, int(min(int64(2*cap(b)), n+1))-len(b))
				continue
			}
			// More than announced (net/http stops at Content-Length, so
			// only a reader of another kind): read the rest as it comes.
			rest, err := io.ReadAll(r)
			return append(b, rest...), err
		}
	}
}

// preallocBytes is the most readAll sets aside before a body's bytes
// arrive (bodies up to it are read into one buffer of their size).
const preallocBytes = 2 << 20

// joinJSON writes an array of JSON values (checked, or written by the
// gateway) without checking them again.
func joinJSON(items []json.RawMessage) json.RawMessage {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}
