package chat

import "encoding/json"

// MetaCarried is the metadata key of the text a message carries beyond its
// parts that the model reads all the same: a provider's reasoning items and
// thinking blocks, which the gateway sends back verbatim with the
// provider's own JSON of the message. The value is a JSON array of
// CarriedText. A message's token count includes them, so that the count is
// of what is sent.
const MetaCarried = "contextd.carried"

// CarriedText is one piece a message carries (MetaCarried).
type CarriedText struct {
	Text string `json:"t"`
	// Item: the provider frames it as an item of its own, like a message
	// (a Responses reasoning item), not as a block of its message (an
	// Anthropic thinking block).
	Item bool `json:"i,omitempty"`
	// Tokens is an estimate counted beside Text, for what contextd cannot
	// read (an encrypted compaction item: its length's share).
	Tokens int64 `json:"n,omitempty"`
}

// Carried is what m carries beyond its parts (MetaCarried): nil when it
// carries nothing, when the value is not an array of CarriedText, or when
// m is not an original message (a placeholder keeps its original's
// metadata but is sent without what the original carried).
func (m *Message) Carried() []CarriedText {
	v, ok := m.Metadata[MetaCarried]
	if !ok || m.Kind != "" && m.Kind != KindNormal {
		return nil
	}
	var out []CarriedText
	if json.Unmarshal([]byte(v), &out) != nil {
		return nil
	}
	return out
}
