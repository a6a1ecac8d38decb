package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
)

// The contextd_expand tool: with the policy option expose_expand_tool, the
// model reads what a placeholder or summary stands for itself. PrepareContext
// returns the tool's definition for the caller to add to the model's tools
// (it is counted in the session's tool tokens like a client tool, and kept
// out of the stored tools), every placeholder and summary names the id to
// pass, and ExpandToolCall answers the model's call: through the gateway on
// the server, through the API by the agent's client helper.

// ExpandToolName is the name of the tool.
const ExpandToolName = compaction.ExpandToolName

// Defaults of the expand tool's server settings (Limits).
const (
	// DefaultExpandMaxRounds is how many expand rounds one model turn may
	// take (CONTEXTD_EXPAND_MAX_ROUNDS).
	DefaultExpandMaxRounds = 3
	// DefaultExpandToolBytes caps the text of one answer
	// (CONTEXTD_EXPAND_TOOL_BYTES); the answer's first line, contextd's
	// note of what the range is and how to read on, comes on top (at most
	// ExpandNoteBytes).
	DefaultExpandToolBytes = 16 << 10
	// ExpandNoteBytes bounds the note line of an answer: it names the id
	// (at most 128 bytes, maxExpandIDBytes) three times and at most eight
	// numbers of at most 20 digits, in about 250 bytes of words.
	ExpandNoteBytes = 1024
	// ExpandAnswerMarginBytes is what an answer may take beyond
	// CONTEXTD_EXPAND_TOOL_BYTES: the note line and the response's framing.
	// The configuration holds the setting to CONTEXTD_MAX_RESPONSE_BYTES
	// minus this, so an answer always fits a response.
	ExpandAnswerMarginBytes = 4 * ExpandNoteBytes
	// maxExpandArgsBytes bounds the arguments the model may write.
	maxExpandArgsBytes = 4096
	maxExpandIDBytes   = 128
)

// expandToolParameters is the tool's JSON Schema; fixed text, so the tool's
// tokens and the prompt-cache prefix never change with a setting.
const expandToolParameters = `{"type":"object","properties":{` +
	`"id":{"type":"string","description":"The id a contextd placeholder or summary names."},` +
	`"offset":{"type":"integer","minimum":0,"description":"Byte offset into the original text to start at (default 0)."},` +
	`"length":{"type":"integer","minimum":1,"description":"How many bytes to read (default and most: the server's cap, 16384 unless configured)."},` +
	`"cursor":{"type":"string","description":"As the previous answer gave it, if it did."}},` +
	`"required":["id"]}`

// ExpandTool is the tool definition added to the prepared view.
func ExpandTool() chat.Tool {
	return chat.Tool{
		Name: ExpandToolName,
		Description: "Reads the original text a contextd placeholder or summary stands for. " +
			"Pass the id it names, whether it says to call " + ExpandToolName + " or ExpandMessage with it. " +
			"Each answer's first line says which bytes it holds and the arguments that read on.",
		Parameters: expandToolParameters,
	}
}

// GatewayLabel is the label key of the sessions the gateway makes
// (gateway.SessionLabel). Their model has only the tools its client sent,
// so it can call no ExpandMessage: their placeholders and summaries take
// the wording compaction.ExpandByNone unless the policy exposes the tool.
const GatewayLabel = "gateway"

// callsNoRPC reports whether the model of session s has no tool that
// calls ExpandMessage (compaction.Policy.NoExpandRPC): a gateway session.
func callsNoRPC(s store.Session) bool {
	_, ok := s.Labels[GatewayLabel]
	return ok
}

// exposesExpandTool reports whether a stored policy turns the tool on.
func exposesExpandTool(p compaction.Overrides) bool {
	return p.ExposeExpandTool != nil && *p.ExposeExpandTool
}

// extraTools are the tool definitions contextd adds to a session's own: the
// caller sends them to the model after the session's tools.
func extraTools(p compaction.Overrides) []chat.Tool {
	if exposesExpandTool(p) {
		return []chat.Tool{ExpandTool()}
	}
	return nil
}

// effectiveTools are the tools a model call of the session carries: its
// own, then contextd's (extraTools). Counts and cache digests use these.
func effectiveTools(tools []chat.Tool, p compaction.Overrides) []chat.Tool {
	extra := extraTools(p)
	if len(extra) == 0 {
		return tools
	}
	return append(append(make([]chat.Tool, 0, len(tools)+len(extra)), tools...), extra...)
}

// checkExpandToolName refuses a client tool named like contextd's while the
// policy adds contextd's: the model would see two tools of one name.
func checkExpandToolName(tools []chat.Tool, p compaction.Overrides) error {
	if !exposesExpandTool(p) {
		return nil
	}
	for i, t := range tools {
		if t.Name == ExpandToolName {
			return chat.Invalid(fmt.Sprintf("tools[%d].name", i), "%q is the tool policy.expose_expand_tool adds; rename this one or turn the option off", ExpandToolName)
		}
	}
	return nil
}

// ExpandToolAnswer is the tool result to send back to the model.
type ExpandToolAnswer struct {
	Content string
	IsError bool
	// Stop is set when the round limit was hit: the content tells the model
	// to stop expanding and answer with what it has.
	Stop bool
}

func (l Limits) expandMaxRounds() int {
	if l.ExpandMaxRounds > 0 {
		return l.ExpandMaxRounds
	}
	return DefaultExpandMaxRounds
}

func (l Limits) expandToolBytes() int {
	if l.ExpandToolBytes > 0 {
		return l.ExpandToolBytes
	}
	return DefaultExpandToolBytes
}

// ExpandToolCall answers one contextd_expand call the model made in session
// id. argsJSON is the call's arguments as the model wrote them
// ({"id": "...", "offset": N, "length": N, "cursor": "K:P"}; all but id
// optional; offset and length in bytes of the rendered original text,
// expandtext.go; cursor as an answer gave it). round is 1 for the
// first expand round of one model turn, 2 for the next...; past
// CONTEXTD_EXPAND_MAX_ROUNDS the answer tells the model to stop expanding
// and answer with what it has (Stop). Bad arguments and an id the session
// does not have (another session's or tenant's included) are answered as
// text for the model with IsError; the Go errors are a round below 1
// (InvalidArgument), a session that does not exist (NotFound), the store's
// and the context's.
//
// The answer holds at most CONTEXTD_EXPAND_TOOL_BYTES of the text (16 KiB by
// default) after a first line of at most ExpandNoteBytes saying which range
// it is and the arguments that read on: the next offset and a cursor naming
// the original that holds it, so the next call starts there. Work: the
// message named, then its originals expandChunk at a time from the cursor's
// (or the first) to the end of the range, never past it, passing over at
// most expandScanBytes (1 MiB) of text before the range (renderRange): a
// call's work is bounded whatever the offset or the size of the text;
// memory: one chunk and the answer.
func (e *Engine) ExpandToolCall(ctx context.Context, tenant, id, argsJSON string, round int) (ExpandToolAnswer, error) {
	if round < 1 {
		return ExpandToolAnswer{}, chat.Invalid("round", "must be 1 or more (1 for a model turn's first expand round), got %d", round)
	}
	if _, err := e.readSession(ctx, tenant, id); err != nil {
		return ExpandToolAnswer{}, err
	}
	if max := e.limits.expandMaxRounds(); round > max {
		return ExpandToolAnswer{IsError: true, Stop: true, Content: fmt.Sprintf("[%s: this turn has already expanded %d times, the most allowed. "+
			"Do not call %s again now: answer with what you have.]", ExpandToolName, max, ExpandToolName)}, nil
	}
	args, problem := parseExpandArgs(argsJSON, e.limits.expandToolBytes())
	if problem != "" {
		return expandError(problem), nil
	}
	msgs, err := e.store.MessagesByID(ctx, tenant, id, []string{args.id})
	if errors.Is(err, store.ErrNotFound) {
		return expandError(fmt.Sprintf("this conversation has no message with id %q; pass an id that a placeholder or summary names", args.id)), nil
	}
	if err != nil {
		return ExpandToolAnswer{}, err
	}
	text, err := e.expandText(ctx, tenant, id, &msgs[0], args)
	if err != nil {
		return ExpandToolAnswer{}, err
	}
	if text.problem != "" {
		return expandError(text.problem), nil
	}
	return ExpandToolAnswer{Content: text.note(args) + "\n" + text.body.String()}, nil
}

func expandError(problem string) ExpandToolAnswer {
	return ExpandToolAnswer{IsError: true, Content: "[" + ExpandToolName + ": " + problem + "]"}
}

// expandArgs are the parsed arguments of a call; length is within the cap.
type expandArgs struct {
	id             string
	offset, length int64
	capped         bool          // the model asked for more than the cap
	cursor         *expandCursor // where an original starts, as an answer said
}

// parseExpandArgs reads the model's arguments; problem says what is wrong
// with them, in words for the model. Unknown fields are ignored (models
// add some).
func parseExpandArgs(argsJSON string, limit int) (expandArgs, string) {
	const usage = `; pass {"id": "<id>"}, optionally with "offset" and "length" in bytes`
	if len(argsJSON) > maxExpandArgsBytes {
		return expandArgs{}, fmt.Sprintf("the arguments are %d bytes, more than the %d allowed%s", len(argsJSON), maxExpandArgsBytes, usage)
	}
	if strings.TrimSpace(argsJSON) == "" {
		argsJSON = "{}"
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(argsJSON), &fields); err != nil || fields == nil {
		return expandArgs{}, "the arguments are not a JSON object" + usage
	}
	a := expandArgs{length: int64(limit)}
	var id string
	if raw, ok := fields["id"]; !ok || json.Unmarshal(raw, &id) != nil || id == "" {
		return a, `"id" is required, a string` + usage
	}
	if len(id) > maxExpandIDBytes {
		return a, fmt.Sprintf(`"id" is %d bytes; ids are at most %d`, len(id), maxExpandIDBytes)
	}
	a.id = id
	offset, ok := jsonWhole(fields["offset"], 0)
	if !ok || offset < 0 {
		return a, fmt.Sprintf(`"offset" must be a whole number of bytes, 0 or more, got %s`, clipArg(fields["offset"]))
	}
	a.offset = offset
	length, ok := jsonWhole(fields["length"], int64(limit))
	if !ok || length < 1 {
		return a, fmt.Sprintf(`"length" must be a whole number of bytes, 1 or more, got %s`, clipArg(fields["length"]))
	}
	if length > int64(limit) {
		length, a.capped = int64(limit), true
	}
	a.length = length
	if raw, ok := fields["cursor"]; ok && string(raw) != "null" {
		c, ok := parseExpandCursor(raw)
		if !ok {
			return a, fmt.Sprintf(`"cursor" must be as an answer gave it (such as "12:40960"), or left out; got %s`, clipArg(raw))
		}
		a.cursor = &c
	}
	return a, ""
}

// parseExpandCursor reads a cursor an answer gave ("<original>:<byte>").
func parseExpandCursor(raw json.RawMessage) (expandCursor, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return expandCursor{}, false
	}
	index, pos, ok := strings.Cut(s, ":")
	i, err1 := strconv.Atoi(index)
	p, err2 := strconv.ParseInt(pos, 10, 64)
	if !ok || err1 != nil || err2 != nil || i < 0 || p < 0 {
		return expandCursor{}, false
	}
	return expandCursor{index: i, pos: p}, true
}

// jsonWhole reads a whole number the model wrote, as a JSON number (16,
// 16.0) or a string of digits ("16"); absent or null, def.
func jsonWhole(raw json.RawMessage, def int64) (int64, bool) {
	text := strings.TrimSpace(string(raw))
	if text == "" || text == "null" {
		return def, true
	}
	if unq, err := strconv.Unquote(text); err == nil && strings.HasPrefix(text, `"`) {
		text = strings.TrimSpace(unq)
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// clipArg quotes what the model wrote for a field, clipped for the answer.
func clipArg(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 40 {
		s = safeCut(s, 40) + "..."
	}
	return s
}

// expandNext is the arguments that read on from offset, with the cursor
// of the original that holds it (the first original's is left out).
func expandNext(id string, offset int64, at expandCursor) string {
	next := `{"id":"` + id + `","offset":` + strconv.FormatInt(offset, 10)
	if at.index > 0 {
		next += `,"cursor":"` + at.String() + `"`
	}
	return next + `}`
}
