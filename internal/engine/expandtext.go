package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// The text contextd_expand reads from. A message named by its own id (a
// normal message, as pruned placeholders name their original) is its own
// original; a placeholder or summary stands for its originals (Replaces),
// as ExpandMessage returns them. One original of one text or tool-result
// part is rendered as that content exactly, so the model gets it back byte
// for byte; otherwise each original is rendered in order as a line naming
// it ("[message m_4, assistant]") followed by its parts: text as it is, a
// tool call as a line with its name and arguments, a tool result after a
// line naming its call, an image as a line. An original that is itself a
// placeholder or summary (an earlier round's) says its id, so the model can
// expand it in turn.

// expandScanBytes bounds the rendered text one call passes over before its
// range starts: an offset further on than that from where the call starts
// (the first original, or the cursor an answer gave) is answered with a
// cursor to look further from, so a call's work never grows with the
// offset or the size of the text.
const expandScanBytes = 1 << 20

// expandCursor says where original index starts in the rendered text: the
// answers give one with the next offset, so the next call starts at that
// original instead of rendering every one before it.
type expandCursor struct {
	index int
	pos   int64
}

func (c expandCursor) String() string {
	return strconv.Itoa(c.index) + ":" + strconv.FormatInt(c.pos, 10)
}

// expanded is one range of the rendered text, or a problem for the model.
type expanded struct {
	what       string // what the text is, for the note
	body       strings.Builder
	started    bool
	start, end int64 // the range of body in the text
	wantEnd    int64
	total      int64 // the text's length; -1 when the range ended before it was known
	more       bool
	next       expandCursor // where the original holding byte end starts
	problem    string
}

// note is the answer's first line: which range of what, and how to read on.
func (x *expanded) note(a expandArgs) string {
	var b strings.Builder
	b.WriteString("[" + ExpandToolName + ` "` + a.id + `": ` + x.what + ", bytes " + strconv.FormatInt(x.start, 10) +
		" to " + strconv.FormatInt(x.end, 10))
	if x.total >= 0 {
		b.WriteString(" of " + strconv.FormatInt(x.total, 10))
	}
	if a.capped {
		b.WriteString(" (length capped at " + strconv.FormatInt(a.length, 10) + ")")
	}
	if x.more {
		b.WriteString(". More follows: call " + ExpandToolName + " with " + expandNext(a.id, x.end, x.next) + ". The text follows this line.]")
	} else {
		b.WriteString(", the end. The text follows this line.]")
	}
	return b.String()
}

// expandText reads the range a asks for of the text behind m: m itself
// when it stands for nothing (a message named by its own id, as pruned
// placeholders name their original), else its originals, expandChunk at a
// time. Originals no longer stored (purged after the archive retention)
// are a problem for the model, not an error.
func (e *Engine) expandText(ctx context.Context, tenant, id string, m *chat.Message, a expandArgs) (*expanded, error) {
	ids := m.Replaces
	read := func(from int) ([]chat.Message, error) {
		return e.store.MessagesByID(ctx, tenant, id, ids[from:min(from+expandChunk, len(ids))])
	}
	if len(ids) == 0 {
		ids = []string{m.ID}
		read = func(int) ([]chat.Message, error) { return []chat.Message{*m}, nil }
	}
	x, err := renderRange(a, m.ID, len(ids), read)
	if errors.Is(err, store.ErrNotFound) {
		return &expanded{problem: "the original messages " + m.ID + " stands for are no longer stored (removed after the retention period); " +
			"what it says is all there is"}, nil
	}
	return x, err
}

// renderRange renders the n originals of message ofID (read returns them
// expandChunk at a time from an index) and keeps bytes [a.offset,
// a.offset+a.length) of the text, moved to UTF-8 boundaries. It starts at
// the original a.cursor names when that is at or before the offset, passes
// over at most expandScanBytes of text before the range (further on, the
// answer is a cursor to look on from), and stops reading at the end of the
// range: a call renders at most expandScanBytes, the range and the two
// originals it ends in, and reads at most that plus a chunk.
func renderRange(a expandArgs, ofID string, n int, read func(int) ([]chat.Message, error)) (*expanded, error) {
	x := &expanded{total: -1}
	var first []chat.Message // the one original, when n is 1
	if n == 1 {
		var err error
		if first, err = read(0); err != nil {
			return nil, err
		}
		if len(first) == 0 {
			return nil, store.ErrNotFound
		}
		if content, ok := soleContent(&first[0]); ok {
			chunk := first
			x.what = "the original content of message " + chunk[0].ID
			x.total = int64(len(content))
			if len(content) == 0 && a.offset == 0 {
				x.started = true
			} else {
				x.cut(content, 0, a)
			}
			x.more = x.started && x.end < x.total
			x.checkStarted(a)
			return x, nil
		}
	}
	x.what = "the " + strconv.Itoa(n) + " messages " + ofID + " stands for, as text"
	if n == 1 && first[0].ID == ofID {
		x.what = "message " + ofID + " as text"
	}
	at := expandCursor{}
	if c := a.cursor; c != nil && c.index < n && c.pos <= a.offset {
		at = *c
	}
	pos, skipped := at.pos, int64(0)
	for i := at.index; i < n; {
		chunk := first
		if i > 0 || chunk == nil {
			var err error
			if chunk, err = read(i); err != nil {
				return nil, err
			}
		}
		if len(chunk) == 0 {
			return nil, store.ErrNotFound // originals removed since (a purge)
		}
		for j := range chunk {
			if !x.started && skipped >= expandScanBytes {
				x.problem = fmt.Sprintf("offset %d is further on than one call looks (%d bytes past where it started, byte %d); "+
					"the text goes on past byte %d: to look further, call %s with %s",
					a.offset, expandScanBytes, at.pos, pos, ExpandToolName, expandNext(a.id, a.offset, expandCursor{i, pos}))
				return x, nil
			}
			piece := renderOriginal(&chunk[j])
			done := x.cut(piece, pos, a)
			if !x.started {
				skipped += int64(len(piece))
			}
			x.next = expandCursor{i, pos}
			pos += int64(len(piece))
			i++
			if x.end == pos {
				x.next = expandCursor{i, pos}
			}
			if done {
				if x.more = x.end < pos || i < n; !x.more {
					x.total = pos
				}
				return x, nil
			}
		}
	}
	x.total = pos
	x.checkStarted(a)
	return x, nil
}

func (x *expanded) checkStarted(a expandArgs) {
	if !x.started {
		x.problem = "offset " + strconv.FormatInt(a.offset, 10) + " is at or past the end of the text (" +
			strconv.FormatInt(x.total, 10) + " bytes); the text starts at offset 0"
	}
}

// cut adds what piece (at pos in the text) holds of the range and reports
// whether the range is complete. The range starts at a.offset moved back
// to the start of its UTF-8 character, and ends a.length bytes later moved
// back likewise (forward, when that would leave the range empty), so every
// range is valid UTF-8 and consecutive ranges concatenate to the text.
func (x *expanded) cut(piece string, pos int64, a expandArgs) bool {
	hi := pos + int64(len(piece))
	k := 0
	if !x.started {
		if a.offset >= hi {
			return false
		}
		k = runeStartBefore(piece, int(a.offset-pos))
		x.started, x.start = true, pos+int64(k)
		x.wantEnd = x.start + a.length
	}
	end := len(piece)
	if x.wantEnd < hi {
		end = runeStartBefore(piece, int(x.wantEnd-pos))
		if end <= k && x.body.Len() == 0 {
			end = runeEndAfter(piece, k)
		}
	}
	x.body.WriteString(piece[k:end])
	x.end = pos + int64(end)
	return end < len(piece) || x.end >= x.wantEnd
}

// runeStartBefore is the largest index at most i that starts a UTF-8
// character of s (or len(s)).
func runeStartBefore(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// runeEndAfter is the end of the UTF-8 character that starts at i.
func runeEndAfter(s string, i int) int {
	_, size := utf8.DecodeRuneInString(s[i:])
	return i + max(size, 1)
}

// safeCut is s cut to at most n bytes at a UTF-8 boundary.
func safeCut(s string, n int) string {
	if n >= len(s) {
		return s
	}
	return s[:runeStartBefore(s, n)]
}

// soleContent is the content of a normal message of one text or tool-result
// part: the text the model gets back byte for byte.
func soleContent(m *chat.Message) (string, bool) {
	if m.Kind != chat.KindNormal && m.Kind != "" || len(m.Parts) != 1 {
		return "", false
	}
	switch p := m.Parts[0]; p.Type {
	case chat.PartText:
		return p.Text, true
	case chat.PartToolResult:
		return p.ToolResult.Content, true
	}
	return "", false
}

// renderOriginal renders one original: a line naming it, then its parts.
func renderOriginal(m *chat.Message) string {
	var b strings.Builder
	b.WriteString("[message " + m.ID + ", " + string(m.Role))
	if m.Name != "" {
		b.WriteString(" " + m.Name)
	}
	switch m.Kind {
	case chat.KindSummary, chat.KindPlaceholder:
		b.WriteString(", a " + string(m.Kind) + " of an earlier compaction: call " + ExpandToolName + ` with id "` + m.ID + `" to read what it stands for`)
	}
	b.WriteString("]\n")
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			b.WriteString(p.Text)
			b.WriteString("\n")
		case chat.PartToolCall:
			b.WriteString("[tool call " + p.ToolCall.ID + ": " + p.ToolCall.Name + " " + p.ToolCall.Arguments + "]\n")
		case chat.PartToolResult:
			b.WriteString("[tool result of call " + p.ToolResult.ToolCallID)
			if p.ToolResult.IsError {
				b.WriteString(", an error")
			}
			b.WriteString("]\n" + p.ToolResult.Content + "\n")
		case chat.PartImage:
			b.WriteString("[an image")
			if p.Image != nil && p.Image.Width > 0 {
				b.WriteString(", " + strconv.Itoa(p.Image.Width) + "x" + strconv.Itoa(p.Image.Height))
			}
			b.WriteString("]\n")
		}
	}
	return b.String()
}
