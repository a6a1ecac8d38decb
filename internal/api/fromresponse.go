package api

import (
	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/chat"
)

var kindFromProto = invert(kindToProto)

// MessagesFromResponse converts the messages of a response (GetMessages,
// PrepareContext) back into the domain model, ids, positions and kinds
// included, for clients that check what the server returned with the
// server's own rules (cmd/soak runs compaction.Validate on views). A part
// of no known kind is dropped.
func MessagesFromResponse(in []*contextdv1.Message) []chat.Message {
	out := make([]chat.Message, len(in))
	for i, m := range in {
		kind, ok := kindFromProto[m.GetKind()]
		if !ok {
			kind = chat.KindNormal
		}
		out[i] = chat.Message{
			ID: m.GetId(), Position: m.GetPosition(), Role: roleFromProto[m.GetRole()], Name: m.GetName(),
			Pinned: m.GetPinned(), Kind: kind, Tokens: m.GetTokens(), Metadata: m.GetMetadata(),
		}
		for _, p := range m.GetParts() {
			if part, err := partFromProto(p); err == nil {
				out[i].Parts = append(out[i].Parts, part)
			}
		}
	}
	return out
}
