package gateway

import (
	"encoding/json"
)

// The JSON of the arrays the gateway writes into the bodies it sends (the
// body itself is written once: body.go). (The request path itself is
// exchange.go's stages.)

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
