package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/contextd/contextd/internal/chat"
)

// Metadata the gateway keeps on the messages it stores.
const (
	// metaDigest is the message's canonical digest (digestOf), so a resent
	// history is matched against the log without re-reading its content.
	metaDigest = chat.MetaGatewayPrefix + "digest"
	// metaRaw is the provider's own JSON of the message, kept only when the
	// domain message cannot reproduce it (images' data, thinking blocks,
	// reasoning items, unknown fields): {"s": door, "v": JSON}.
	metaRaw = chat.MetaGatewayPrefix + "raw"
	// metaReply marks an assistant reply the gateway recorded from the
	// provider's answer.
	metaReply = chat.MetaGatewayPrefix + "reply"
)

// rawEnvelope is metaRaw's value.
type rawEnvelope struct {
	Door string          `json:"s"`
	JSON json.RawMessage `json:"v"`
}

// setRaw keeps raw on m unless generated (what the door would write from m
// alone) says the same: then nothing is kept, so plain text and tool calls
// cost no second copy. Both are compared as canonical JSON. What raw
// carries that the model reads beyond m's parts is kept for counting
// (setCarried).
func setRaw(m *chat.Message, door string, raw, generated json.RawMessage) {
	if canonicalEqual(raw, generated) {
		return
	}
	// The client's cache marks are for this request only (the gateway
	// places marks per request), so they are not kept.
	env, _ := json.Marshal(rawEnvelope{Door: door, JSON: withoutCacheControl(raw)})
	setMeta(m, metaRaw, string(env))
	setCarried(m, raw, door == doorAnthropic)
}

// rawOf is the provider JSON kept on m for door, or nil. Only an original
// (normal) message's raw stands for it: a placeholder keeps its original's
// metadata but not its content.
func rawOf(m *chat.Message, door string) json.RawMessage {
	if m.Kind != "" && m.Kind != chat.KindNormal {
		return nil
	}
	return rawAnyKind(m, door)
}

// rawAnyKind is the provider JSON kept on m (also on a placeholder, whose
// metadata is its original's), or nil.
func rawAnyKind(m *chat.Message, door string) json.RawMessage {
	s, ok := m.Metadata[metaRaw]
	if !ok {
		return nil
	}
	var env rawEnvelope
	if json.Unmarshal([]byte(s), &env) != nil || env.Door != door {
		return nil
	}
	return env.JSON
}

func setMeta(m *chat.Message, k, v string) {
	if m.Metadata == nil {
		m.Metadata = map[string]string{}
	}
	m.Metadata[k] = v
}

// digestOf identifies a message by what it says, not by how a client
// serialized it: role, text, tool calls (arguments as canonical JSON),
// tool results and images (with extra: the digests of their data, which
// the domain message does not hold). Empty text parts and what the domain
// does not model (thinking, reasoning, cache marks) do not count, so a
// client that echoes a reply with other field order, null fields or
// without its thinking still matches it.
func digestOf(m *chat.Message, extra []string) [32]byte {
	h := sha256.New()
	w := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	w(string(m.Role))
	w(m.Name)
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			if p.Text != "" {
				w("t")
				w(p.Text)
			}
		case chat.PartToolCall:
			w("c")
			w(p.ToolCall.ID)
			w(p.ToolCall.Name)
			w(string(canonicalJSON([]byte(p.ToolCall.Arguments))))
		case chat.PartToolResult:
			w("r")
			w(p.ToolResult.ToolCallID)
			w(p.ToolResult.Content)
			if p.ToolResult.IsError {
				w("e")
			}
		case chat.PartImage:
			w("i")
			w(p.Image.MediaType)
			w(p.Image.Detail)
		}
	}
	for _, x := range extra {
		w("x")
		w(x)
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// storedDigest is the digest a stored message was appended with, or the
// one its content gives (messages appended through the gRPC API).
func storedDigest(m *chat.Message) [32]byte {
	if d, ok := hexDigest(m.Metadata[metaDigest]); ok {
		return d
	}
	return digestOf(m, nil)
}

// hexDigest decodes a digest written in hex (without allocating: every
// message of a view is looked up by it on every request).
func hexDigest(s string) (d [32]byte, ok bool) {
	if len(s) != 2*len(d) {
		return d, false
	}
	var bad byte // any invalid digit sets the table's high bit
	for i := range d {
		hi, lo := unhex[s[2*i]], unhex[s[2*i+1]]
		bad |= hi | lo
		d[i] = hi<<4 | lo&0x0f
	}
	if bad&0x80 != 0 {
		return [32]byte{}, false
	}
	return d, true
}

// unhex is each byte's value as a hex digit, 0xff for a byte that is not
// one: a table, not a comparison per digit, whose branches a digest's
// mix of digits and letters mispredicts (hexDigest was 11 % of the
// gateway's CPU on a growing conversation, docs/performance.md).
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c], t[c-'a'+'A'] = c-'a'+10, c-'a'+10
	}
	return t
}()

// stamp sets m's digest metadata and returns the digest.
func stamp(m *chat.Message, extra []string) [32]byte {
	d := digestOf(m, extra)
	setMeta(m, metaDigest, hex.EncodeToString(d[:]))
	return d
}

// sourceDigest is the digest of an image's (or file's) data as the client
// sent it, for digestOf's extra.
func sourceDigest(src []byte) string {
	d := sha256.Sum256(canonicalJSON(src))
	return hex.EncodeToString(d[:16])
}

// canonicalJSON is b with object keys sorted and no insignificant space
// (numbers kept as written); b itself when it is not JSON.
func canonicalJSON(b []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

// canonicalEqual compares two JSON texts as canonical JSON, ignoring
// cache_control marks (the gateway places those itself).
func canonicalEqual(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return bytes.Equal(canonicalJSON(withoutCacheControl(a)), canonicalJSON(withoutCacheControl(b)))
}

// withoutCacheControl removes "cache_control" keys at any depth.
func withoutCacheControl(b json.RawMessage) json.RawMessage {
	if !bytes.Contains(b, []byte(`"cache_control"`)) {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return b
	}
	out, err := json.Marshal(dropKey(v, "cache_control"))
	if err != nil {
		return b
	}
	return out
}

func dropKey(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, key)
		for k, e := range x {
			x[k] = dropKey(e, key)
		}
	case []any:
		for i, e := range x {
			x[i] = dropKey(e, key)
		}
	}
	return v
}
