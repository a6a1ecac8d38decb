package gateway

import (
	"encoding/json"
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// Carried text: a reasoning item or a thinking block rides with its message
// verbatim (the provider's JSON, metaRaw) and the model reads its text, but
// the domain message has no part for it. Its text is kept on the message
// (chat.MetaCarried), so that the message's count is of what goes upstream:
// without it, a view that no report has anchored yet (the first request
// after a compaction) was short by every kept turn's reasoning.

// carriedItem is what counting needs of an item or block.
type carriedItem struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
	Summary  []struct {
		Text string `json:"text"`
	} `json:"summary"`
	Content json.RawMessage `json:"content"`
	// EncryptedContent is a Responses compaction item's.
	EncryptedContent string `json:"encrypted_content"`
}

// setCarried keeps on m the text of the reasoning items and thinking blocks
// of raw (a JSON array of a message's items or blocks, as sent upstream);
// nothing when there are none. An encrypted reasoning item or a redacted
// thinking block carries nothing contextd can read: it counts as nothing.
// anthropic: raw is an Anthropic message's blocks (a compaction block is a
// point the provider reads from), not Responses items.
func setCarried(m *chat.Message, raw json.RawMessage, anthropic bool) {
	var items []carriedItem
	if json.Unmarshal(raw, &items) != nil {
		return
	}
	var texts []chat.CarriedText
	for _, it := range items {
		var parts []string
		switch it.Type {
		case "compaction":
			text, stops := compactionCarried(it, anthropic)
			texts = append(texts, text)
			setMeta(m, metaCompactionItem, "1")
			if stops {
				setMeta(m, chat.MetaProviderCompaction, "1")
			}
			continue
		case "thinking":
			parts = append(parts, it.Thinking)
		case "reasoning":
			for _, s := range it.Summary {
				parts = append(parts, s.Text)
			}
			var content []struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(it.Content, &content) == nil {
				for _, c := range content {
					parts = append(parts, c.Text)
				}
			}
		default:
			continue
		}
		if text := strings.Join(parts, "\n"); text != "" {
			// A Responses item is framed like a message; a thinking
			// block is a block of its message.
			texts = append(texts, chat.CarriedText{Text: text, Item: it.Type == "reasoning"})
		}
	}
	if len(texts) == 0 {
		return
	}
	v, _ := json.Marshal(texts)
	setMeta(m, chat.MetaCarried, string(v))
}
