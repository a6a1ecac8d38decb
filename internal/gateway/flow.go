package gateway

import (
	"encoding/json"
	"maps"
	"slices"
)

// The JSON of the bodies the gateway sends: objectJSON and joinJSON. (The
// request path itself is exchange.go's stages.)

// objectJSON writes an object of fields, keys sorted. The values are
// JSON the request's parse already checked (or the gateway wrote), so they
// are copied, not checked again.
func objectJSON(fields map[string]json.RawMessage) []byte {
	keys := slices.Sorted(maps.Keys(fields))
	n := 2
	for _, k := range keys {
		n += len(k) + len(fields[k]) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		q, _ := json.Marshal(k)
		b = append(b, q...)
		b = append(b, ':')
		b = append(b, fields[k]...)
	}
	return append(b, '}')
}

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
