package chat

// Provider compaction: a provider that compacts a conversation itself
// sends the compacted state as an item the client sends back verbatim:
// Anthropic's server-side compaction, a `compaction` block in an assistant
// message, after which the API reads nothing before the latest one; and
// OpenAI's /v1/responses/compact, an item of type `compaction` (its
// encrypted_content) in the compacted input the client sends next. The
// gateway carries such an item with its message (MetaCarried) and counts
// it; for Anthropic's (MetaProviderCompaction) it marks the messages
// before it MetaProviderDropped: they still go upstream as the client sent
// them, but they count nothing, as the provider does not read them.

// MetaProviderDropped is the metadata key of a message the provider no
// longer reads (it is before the latest provider compaction of its
// conversation): counted as 0 tokens, and pinned, so contextd never
// summarizes or prunes what the provider has already dropped.
const MetaProviderDropped = "contextd.provider_dropped"

// MetaGatewayPrefix begins every metadata key the gateway keeps on the
// messages it stores (gateway/raw.go and beside it): they are the
// gateway's own, which no API client may set.
const MetaGatewayPrefix = "contextd.gateway."

// ProviderDropped reports whether m is a message the provider no longer
// reads (MetaProviderDropped), as an original (a placeholder keeps its
// original's metadata, but is contextd's own and is read).
func (m *Message) ProviderDropped() bool {
	if m.Kind != "" && m.Kind != KindNormal {
		return false
	}
	_, ok := m.Metadata[MetaProviderDropped]
	return ok
}

// MetaProviderCompaction is the metadata key of a message carrying an
// Anthropic compaction block, before which the provider reads nothing. (A
// Responses compaction item is not such a point: the input before it, the
// messages the compaction kept, is read.)
const MetaProviderCompaction = "contextd.provider_compaction"

// ProviderCompacted reports whether m carries a compaction block before
// which the provider reads nothing (MetaProviderCompaction), as an
// original (a placeholder or summary is contextd's own).
func (m *Message) ProviderCompacted() bool {
	if m.Kind != "" && m.Kind != KindNormal {
		return false
	}
	_, ok := m.Metadata[MetaProviderCompaction]
	return ok
}

// ProviderReadsFrom is the index of the latest message of msgs carrying a
// provider compaction: the provider reads msgs from there (0 when none
// does: it reads them all).
func ProviderReadsFrom(msgs []Message) int {
	for i := len(msgs) - 1; i > 0; i-- {
		if msgs[i].ProviderCompacted() {
			return i
		}
	}
	return 0
}
