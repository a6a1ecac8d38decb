package gateway

import (
	"maps"

	"github.com/contextd/contextd/internal/chat"
)

// asSent puts into the view, in place of the stored copy of each message
// the client sent in this request, the client's own version of it: what
// goes upstream for a message that was not compacted is what the client
// sent this time (its audio, files, images, reasoning, thinking and
// unknown fields; a tool result it cleared, cleared), never the stored copy
// of an earlier request. A stored message is the client's message k when
// it carries the history chain the request's message k ends (identify.go),
// so the two have the same identity and place. Placeholders and summaries
// stay contextd's. The stored copy's place (id, position, kind, tokens)
// and its other metadata are kept; the view is copied before it is changed
// (the engine may hold it).
func asSent(view []chat.Message, c *conversation) []chat.Message {
	out := view
	copied := false
	for i := range view {
		client := clientOf(&view[i], c) // clientedit.go: a client edit stands at its original's place
		if client == nil {
			continue
		}
		if view[i].Metadata[metaDigest] == client.Metadata[metaDigest] && view[i].Metadata[metaRaw] == client.Metadata[metaRaw] {
			continue // the same bytes as stored (the usual case): nothing to change
		}
		if !copied {
			out, copied = append([]chat.Message(nil), view...), true
		}
		out[i] = clientCopy(&out[i], client)
	}
	return out
}

// clientCopy is the stored message with the client's content: its parts
// and name, and its bytes' metadata (raw JSON and digest) in place of the
// stored copy's; the stored copy's place and other metadata stay. The
// parts are shared with client.
func clientCopy(stored, client *chat.Message) chat.Message {
	m := *stored
	m.Parts, m.Name = client.Parts, client.Name
	m.Metadata = maps.Clone(m.Metadata)
	delete(m.Metadata, metaRaw)
	for _, k := range []string{metaRaw, metaDigest} {
		if v, ok := client.Metadata[k]; ok {
			m.Metadata[k] = v
		}
	}
	return m
}
