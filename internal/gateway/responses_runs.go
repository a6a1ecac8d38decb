package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/contextd/contextd/internal/chat"
)

// A Responses request's input is split into runs of items (one domain
// message each: see openAIResponses) by what each item's type, role and
// call_id say, read without decoding the rest of it; a run the memo holds
// is not decoded at all. Only the runs a door has not seen before (the new
// turn, usually) are decoded, item by item.

// rKind is what grouping needs of an item.
type rKind struct{ typ, role, callID string }

func (k rKind) isMessage() bool {
	it := rItem{Type: k.typ, Role: k.role}
	return it.isMessage()
}

// grouped: the item joins the run of items the model produced (assistant
// messages, calls, reasoning and items yet unknown), as rToDomain groups.
func (k rKind) grouped() bool {
	it := rItem{Type: k.typ, Role: k.role, CallID: k.callID}
	return it.isMessage() && it.Role == "assistant" || !it.isMessage() && !it.isOutput()
}

// rKindOf reads an item's type, role and call_id (member names matched as
// encoding/json matches them: the last of any case); false when the item
// is not an object or one of them is neither a string nor null.
func rKindOf(raw []byte) (rKind, bool) {
	var k rKind
	valid := true
	ok := eachMember(raw, func(name, v []byte) {
		var dst *string
		switch {
		case bytes.EqualFold(name, []byte("type")):
			dst = &k.typ
		case bytes.EqualFold(name, []byte("role")):
			dst = &k.role
		case bytes.EqualFold(name, []byte("call_id")):
			dst = &k.callID
		default:
			return
		}
		valid = valid && stringValue(v, dst)
	})
	return k, ok && valid
}

// rRequestMessages makes the domain messages of a request's items (after
// its system items; offset is the first one's index), the memo's where it
// holds their run; runs are each message's items as the client sent them.
func rRequestMessages(memo *memo, raws []json.RawMessage, offset int) (memoEntry, [][]json.RawMessage, error) {
	kinds := make([]rKind, len(raws))
	for i, r := range raws {
		k, ok := rKindOf(r)
		if !ok || k.typ == "" && k.role == "" {
			return memoEntry{}, nil, chat.Invalid(fmt.Sprintf("input[%d]", i+offset), "must be an item with a type or a role")
		}
		kinds[i] = k
	}
	var out memoEntry
	var runs [][]json.RawMessage
	for i := 0; i < len(raws); {
		j := i + 1
		if kinds[i].grouped() {
			for j < len(raws) && kinds[j].grouped() {
				j++
			}
		}
		run := raws[i:j:j]
		e, ok := memo.get(runKey(doorOpenAIResponses, run))
		if !ok {
			items := make([]rItem, len(run))
			for n, r := range run {
				if err := json.Unmarshal(r, &items[n]); err != nil {
					return memoEntry{}, nil, chat.Invalid(fmt.Sprintf("input[%d]", i+n+offset), "must be an item with a type or a role")
				}
			}
			var err error
			if e, _, err = rToDomain(memo, run, items, i+offset); err != nil {
				return memoEntry{}, nil, err
			}
		}
		out.take(e)
		for range e.msgs {
			runs = append(runs, run)
		}
		i = j
	}
	return out, runs, nil
}
