package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

var (
	expandIDRe   = regexp.MustCompile(`contextd_expand with id "([^"]+)"`)
	expandNextRe = regexp.MustCompile(`More follows: call contextd_expand with (\{"id":"[^"]+","offset":(\d+)(?:,"cursor":"\d+:\d+")?\})`)
)

func exposeExpand() compaction.Overrides {
	on := true
	return compaction.Overrides{ExposeExpandTool: &on}
}

// expandSession creates a gpt-4 session (8,192-token window) of a coding
// agent whose tool results mix ASCII with two-, three- and four-byte UTF-8,
// so byte ranges fall inside characters.
func expandSession(t *testing.T, e *engine.Engine, tenantID, sessionID string, policy compaction.Overrides, steps int) (engine.SessionView, map[string]string) {
	t.Helper()
	ctx := t.Context()
	v, err := e.CreateSession(ctx, tenantID, engine.NewSession{ID: sessionID, Model: "gpt-4", System: "You are a coding agent.", Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{userMsg("Fix the failing test in src/app.py.")}
	contents := map[string]string{} // tool call id → result content
	for i := 0; i < steps; i++ {
		id := fmt.Sprintf("call_%d", i)
		content := fmt.Sprintf("step %d: %s", i, strings.Repeat("lorem ipsum é dolor € sit 😀 amet ", 45))
		contents[id] = content
		msgs = append(msgs, callMsg(id), resultMsg(id, content))
	}
	if _, err := e.AppendMessages(ctx, tenantID, v.ID, engine.AppendInput{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	return v, contents
}

// readAll follows the answers' "More follows" arguments from offset 0, as
// a model copies them (with the length added), and returns the
// concatenated text and the number of calls.
func readAll(t *testing.T, e *engine.Engine, tenantID, session, id string, length int) (string, int) {
	t.Helper()
	var text strings.Builder
	offset := 0
	args := fmt.Sprintf(`{"id":%q,"length":%d}`, id, length)
	for calls := 1; ; calls++ {
		a, err := e.ExpandToolCall(t.Context(), tenantID, session, args, 1)
		if err != nil || a.IsError || a.Stop {
			t.Fatalf("expand %s: %+v, %v", args, a, err)
		}
		note, body, ok := strings.Cut(a.Content, "\n")
		if !ok || !strings.HasPrefix(note, "[contextd_expand ") {
			t.Fatalf("answer without its note line: %q", a.Content)
		}
		if len(body) > length {
			t.Fatalf("a range of %d bytes for length %d", len(body), length)
		}
		text.WriteString(body)
		m := expandNextRe.FindStringSubmatch(note)
		if m == nil {
			if !strings.Contains(note, "the end") {
				t.Fatalf("note neither ends nor continues: %q", note)
			}
			return text.String(), calls
		}
		next, _ := strconv.Atoi(m[2])
		if next <= offset {
			t.Fatalf("next offset %d does not move past %d", next, offset)
		}
		offset = next
		args = strings.TrimSuffix(m[1], "}") + `,"length":` + strconv.Itoa(length) + `}`
	}
}

// The model's view names, in every placeholder and summary, the id to
// pass; expanding a pruned tool result range by range gives back its
// content byte for byte, whatever the range length (ranges cut inside
// multi-byte characters move to their boundaries).
func TestExpandToolPlaceholdersGiveOriginalsBack(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, contents := expandSession(t, e, tenant, "", exposeExpand(), 16)
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{userMsg("Go on.")}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Status.Compacted {
			t.Fatalf("no compaction: %+v", res.Status.Usage)
		}
		if !reflect.DeepEqual(res.Tools, []chat.Tool{engine.ExpandTool()}) {
			t.Errorf("PrepareContext tools: %+v", res.Tools)
		}
		checked := 0
		for _, m := range res.Messages {
			if m.Kind == chat.KindNormal {
				continue
			}
			text := m.Parts[0].Text
			if m.Parts[0].ToolResult != nil {
				text = m.Parts[0].ToolResult.Content
			}
			ids := expandIDRe.FindStringSubmatch(text)
			if ids == nil || strings.Contains(text, "ExpandMessage") {
				t.Fatalf("%s %s does not name the id to pass: %q", m.Kind, m.ID, text)
			}
			if m.Kind == chat.KindSummary && ids[1] != m.ID {
				t.Errorf("summary %s names %q", m.ID, ids[1])
			}
			if m.Kind != chat.KindPlaceholder || m.Parts[0].ToolResult == nil {
				continue
			}
			want := contents[m.Parts[0].ToolResult.ToolCallID]
			for _, length := range []int{7, 1000, 16384} {
				got, calls := readAll(t, e, tenant, v.ID, ids[1], length)
				if got != want {
					t.Fatalf("length %d: expanded %d bytes in %d calls, differs from the original's %d", length, len(got), calls, len(want))
				}
			}
			checked++
		}
		if checked == 0 {
			t.Fatal("no pruned tool result in the view")
		}
	})
}

// A summary expands to its originals rendered in order; a summary of a
// later round names the earlier summary it replaced by its id, which
// expands in turn.
func TestExpandToolSummariesAndNestedIDs(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, _ := expandSession(t, e, tenant, "", exposeExpand(), 12)
		first, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize})
		if err != nil || !first.Compacted {
			t.Fatalf("first summary: %+v, %v", first, err)
		}
		sum1 := first.Compaction.Items[0].NewID
		var more []chat.Message
		for i := 100; i < 112; i++ {
			id := fmt.Sprintf("call_%d", i)
			more = append(more, callMsg(id), resultMsg(id, fmt.Sprintf("step %d: %s", i, strings.Repeat("lorem ipsum dolor ", 90))))
		}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: more}); err != nil {
			t.Fatal(err)
		}
		second, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize})
		if err != nil || !second.Compacted {
			t.Fatalf("second summary: %+v, %v", second, err)
		}
		sum2 := second.Compaction.Items[0].NewID
		text, _ := readAll(t, e, tenant, v.ID, sum2, 16384)
		nested := `[message ` + sum1 + `, user, a summary of an earlier compaction: call contextd_expand with id "` + sum1 + `"`
		if !strings.Contains(text, nested) {
			t.Errorf("the second summary's text does not name the first by id:\n%.600s", text)
		}
		if !strings.Contains(text, "[tool call call_100: read {\"path\":\"x\"}]") || !strings.Contains(text, "[tool result of call call_100]\nstep 100: lorem") {
			t.Errorf("originals not rendered with their calls and results:\n%.600s", text)
		}
		inner, _ := readAll(t, e, tenant, v.ID, sum1, 1<<20)
		if !strings.Contains(inner, "[message msg_2, assistant]\n[tool call call_0: read") {
			t.Errorf("the first summary's originals:\n%.400s", inner)
		}
		// Rendered text is cut in ranges that concatenate to the whole.
		small, calls := readAll(t, e, tenant, v.ID, sum1, 333)
		if small != inner || calls < 2 {
			t.Errorf("ranges of 333 bytes (%d calls) differ from one read", calls)
		}
	})
}

// Bad arguments and ids the session does not have are answered to the
// model as errors, never as Go errors; a Go error is the caller's (round,
// session).
func TestExpandToolArguments(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		// The same session id in two tenants: neither reads the other's.
		v, contents := expandSession(t, e, tenant, "shared-id", exposeExpand(), 16)
		if _, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierPrune}); err != nil {
			t.Fatal(err)
		}
		other, _ := expandSession(t, e, "other-tenant", "shared-id", exposeExpand(), 1)
		ph := ""
		page, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			if m.Kind == chat.KindPlaceholder {
				ph = m.ID
				break
			}
		}
		if ph == "" {
			t.Fatal("no placeholder")
		}
		original := contents["call_0"]
		for _, c := range []struct {
			name, tenant, args, want string
		}{
			{"bad JSON", tenant, `{"id": "msg_3"`, "not a JSON object"},
			{"not an object", tenant, `["msg_3"]`, "not a JSON object"},
			{"missing id", tenant, `{"offset": 3}`, `"id" is required`},
			{"empty arguments", tenant, ``, `"id" is required`},
			{"id not a string", tenant, `{"id": 3}`, `"id" is required`},
			{"long id", tenant, `{"id": "` + strings.Repeat("x", 129) + `"}`, "at most 128"},
			{"negative offset", tenant, `{"id": "msg_3", "offset": -1}`, `"offset" must be a whole number of bytes, 0 or more, got -1`},
			{"fractional offset", tenant, `{"id": "msg_3", "offset": 1.5}`, `"offset" must be a whole number`},
			{"zero length", tenant, `{"id": "msg_3", "length": 0}`, `"length" must be a whole number of bytes, 1 or more`},
			{"offset past the end", tenant, fmt.Sprintf(`{"id": "msg_3", "offset": %d}`, len(original)), "past the end of the text"},
			{"huge arguments", tenant, `{"id": "msg_3", "pad": "` + strings.Repeat("x", 5000) + `"}`, "more than the 4096 allowed"},
			{"unknown id", tenant, `{"id": "ph_99_1"}`, `no message with id "ph_99_1"`},
			{"another tenant's placeholder", "other-tenant", `{"id": "` + ph + `"}`, `no message with id "` + ph + `"`},
		} {
			t.Run(c.name, func(t *testing.T) {
				a, err := e.ExpandToolCall(ctx, c.tenant, other.ID, c.args, 1)
				if err != nil || !a.IsError || a.Stop || !strings.Contains(a.Content, c.want) || strings.Contains(a.Content, "lorem") {
					t.Errorf("%s: %+v, %v; want an error answer saying %q", c.args, a, err, c.want)
				}
			})
		}
		// A huge length is capped, a whole number written as 16.0 or "16" reads.
		a, err := e.ExpandToolCall(ctx, tenant, v.ID, `{"id": "msg_3", "length": 1e12}`, 1)
		if err != nil || a.IsError || !strings.Contains(a.Content, "length capped at 16384") {
			t.Errorf("huge length: %.200q, %v", a.Content, err)
		}
		for _, args := range []string{`{"id": "msg_3", "offset": 2.0, "length": "5"}`, `{"id": "msg_3", "offset": "2", "length": 5, "why": "to see"}`} {
			a, err := e.ExpandToolCall(ctx, tenant, v.ID, args, 1)
			if _, body, _ := strings.Cut(a.Content, "\n"); err != nil || a.IsError || body != original[2:7] {
				t.Errorf("%s: %q, %v; want %q", args, a.Content, err, original[2:7])
			}
		}
		// A range that would end inside a character ends before it.
		a, err = e.ExpandToolCall(ctx, tenant, v.ID, `{"id": "msg_3", "offset": 16, "length": 5}`, 1)
		if note, body, _ := strings.Cut(a.Content, "\n"); err != nil || body != original[16:20] || !strings.Contains(note, `"offset":20}`) {
			t.Errorf("a range ending inside é: %q, %v; want %q", a.Content, err, original[16:20])
		}
		// The caller's errors.
		if _, err := e.ExpandToolCall(ctx, tenant, v.ID, `{"id":"msg_3"}`, 0); !isInvalid(err, "round") {
			t.Errorf("round 0: %v", err)
		}
		if _, err := e.ExpandToolCall(ctx, tenant, "no-such-session", `{"id":"msg_3"}`, 1); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown session: %v", err)
		}
	})
}

func isInvalid(err error, field string) bool {
	var inv *chat.InvalidError
	return errors.As(err, &inv) && len(inv.Violations) > 0 && inv.Violations[0].Field == field
}

// Past the configured rounds, the answer tells the model to stop.
func TestExpandToolRoundLimit(t *testing.T) {
	backendsWith(t, []engine.Option{engine.WithLimits(engine.Limits{ExpandMaxRounds: 2, ExpandToolBytes: 100})}, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, contents := expandSession(t, e, tenant, "", exposeExpand(), 1)
		for round := 1; round <= 3; round++ {
			a, err := e.ExpandToolCall(ctx, tenant, v.ID, `{"id":"msg_3"}`, round)
			if err != nil {
				t.Fatal(err)
			}
			_, body, _ := strings.Cut(a.Content, "\n")
			switch {
			case round <= 2 && (a.Stop || a.IsError || body != contents["call_0"][:100]):
				t.Errorf("round %d: %+v", round, a)
			case round == 3 && (!a.Stop || !a.IsError || !strings.Contains(a.Content, "already expanded 2 times") || !strings.Contains(a.Content, "answer with what you have")):
				t.Errorf("round 3: %+v", a)
			}
		}
		// The session is checked first: past the limit too, a session that
		// does not exist, or is another tenant's, is NotFound.
		for _, tn := range []string{tenant, "other-tenant"} {
			id := v.ID
			if tn == tenant {
				id = "no-such-session"
			}
			if a, err := e.ExpandToolCall(ctx, tn, id, `{"id":"msg_3"}`, 3); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("round 3 in %s/%s: %+v, %v; want NotFound", tn, id, a, err)
			}
		}
	})
}

// The tool is counted like a client tool: a session with the option has
// the usage of one without it that lists the tool itself; turning the
// option on or off recounts; a client tool of the same name is refused
// while the option adds contextd's.
func TestExpandToolCountedLikeAClientTool(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		read := chat.Tool{Name: "read", Description: "Read a file.", Parameters: `{"type":"object"}`}
		on, _ := expandSession(t, e, tenant, "", exposeExpand(), 3)
		plain, _ := expandSession(t, e, tenant, "", compaction.Overrides{}, 3)
		for _, id := range []string{on.ID, plain.ID} {
			if _, err := e.UpdateSession(ctx, tenant, id, engine.SessionUpdate{Mask: []string{engine.FieldTools}, Tools: []chat.Tool{read}}); err != nil {
				t.Fatal(err)
			}
		}
		listed, _ := expandSession(t, e, tenant, "", compaction.Overrides{}, 3)
		if _, err := e.UpdateSession(ctx, tenant, listed.ID, engine.SessionUpdate{Mask: []string{engine.FieldTools}, Tools: []chat.Tool{read, engine.ExpandTool()}}); err != nil {
			t.Fatal(err)
		}
		usage := func(id string) engine.Usage {
			u, err := e.SessionUsage(ctx, tenant, id)
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		uOn, uListed, uPlain := usage(on.ID), usage(listed.ID), usage(plain.ID)
		if uOn.ToolsTokens != uListed.ToolsTokens || uOn.Used != uListed.Used || uOn.ToolsTokens <= uPlain.ToolsTokens+20 {
			t.Errorf("tools tokens: option %d, listed %d, neither %d; used %d, %d", uOn.ToolsTokens, uListed.ToolsTokens, uPlain.ToolsTokens, uOn.Used, uListed.Used)
		}
		pOn, err := e.PrepareContext(ctx, tenant, on.ID, engine.PrepareInput{})
		if err != nil {
			t.Fatal(err)
		}
		pListed, err := e.PrepareContext(ctx, tenant, listed.ID, engine.PrepareInput{})
		if err != nil {
			t.Fatal(err)
		}
		if pOn.Status.Usage.Used != pListed.Status.Usage.Used || len(pOn.Tools) != 1 || pListed.Tools != nil {
			t.Errorf("prepare: used %d vs %d, tools %v vs %v", pOn.Status.Usage.Used, pListed.Status.Usage.Used, pOn.Tools, pListed.Tools)
		}
		// The stored tools are the client's alone.
		got, err := e.GetSession(ctx, tenant, on.ID)
		if err != nil || !reflect.DeepEqual(got.Session.Tools, []chat.Tool{read}) {
			t.Errorf("stored tools %+v, %v", got.Session.Tools, err)
		}
		// Off, then on again, recounts.
		off := false
		v, err := e.UpdateSession(ctx, tenant, on.ID, engine.SessionUpdate{Mask: []string{engine.FieldPolicy}, Policy: compaction.Overrides{ExposeExpandTool: &off}})
		if err != nil || v.Usage.ToolsTokens != uPlain.ToolsTokens {
			t.Errorf("off: tools tokens %d, want %d (%v)", v.Usage.ToolsTokens, uPlain.ToolsTokens, err)
		}
		if p, err := e.PrepareContext(ctx, tenant, on.ID, engine.PrepareInput{}); err != nil || p.Tools != nil {
			t.Errorf("off: prepare tools %v, %v", p.Tools, err)
		}
		v, err = e.UpdateSession(ctx, tenant, on.ID, engine.SessionUpdate{Mask: []string{engine.FieldPolicy}, Policy: exposeExpand()})
		if err != nil || v.Usage.ToolsTokens != uListed.ToolsTokens {
			t.Errorf("on again: tools tokens %d, want %d (%v)", v.Usage.ToolsTokens, uListed.ToolsTokens, err)
		}
		// A client tool of the same name, with the option on.
		_, err = e.UpdateSession(ctx, tenant, listed.ID, engine.SessionUpdate{Mask: []string{engine.FieldPolicy}, Policy: exposeExpand()})
		if !isInvalid(err, "tools[1].name") {
			t.Errorf("option on beside a client contextd_expand: %v", err)
		}
		_, err = e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", Tools: []chat.Tool{engine.ExpandTool()}, Policy: exposeExpand()})
		if !isInvalid(err, "tools[0].name") {
			t.Errorf("create with both: %v", err)
		}
	})
}

// Without the option, the wording is the ExpandMessage one (a gateway
// session's: the id alone, since its model can call no RPC) and the
// prepared view adds no tool; every placeholder and summary still names an
// id, so once the option is turned on the model expands each with the tool
// (whose description says to pass the id either wording names).
func TestExpandToolOffKeepsWording(t *testing.T) {
	for _, c := range []struct {
		name   string
		labels map[string]string
		named  string
	}{
		{"api", nil, `ExpandMessage with message id ([A-Za-z0-9_]+)`},
		{"gateway", map[string]string{engine.GatewayLabel: "openai-chat"}, `[Ii]ts id is ([A-Za-z0-9_]+)`},
	} {
		t.Run(c.name, func(t *testing.T) { expandToolOffKeepsWording(t, c.labels, c.named) })
	}
}

func expandToolOffKeepsWording(t *testing.T, labels map[string]string, named string) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, _ := expandSession(t, e, tenant, "", compaction.Overrides{}, 8)
		if labels != nil {
			if _, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{engine.FieldLabels}, Labels: labels}); err != nil {
				t.Fatal(err)
			}
		}
		low := 0.05
		if c, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize, Target: &low}); err != nil || !c.Compacted {
			t.Fatalf("summary: %+v, %v", c, err)
		}
		var more []chat.Message
		for i := 100; i < 116; i++ {
			id := fmt.Sprintf("call_%d", i)
			more = append(more, callMsg(id), resultMsg(id, fmt.Sprintf("step %d: %s", i, strings.Repeat("lorem ipsum dolor ", 90))))
		}
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: append(more, userMsg("Go on."))})
		if err != nil || !res.Status.Compacted || res.Tools != nil {
			t.Fatalf("%v, compacted %v, tools %v", err, res.Status.Compacted, res.Tools)
		}
		if _, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{engine.FieldPolicy}, Policy: exposeExpand()}); err != nil {
			t.Fatal(err)
		}
		if d := engine.ExpandTool().Description; !strings.Contains(d, "contextd_expand or ExpandMessage") {
			t.Errorf("the tool's description does not say either wording's id works: %q", d)
		}
		page, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		ided := regexp.MustCompile(named)
		kinds := map[chat.Kind]int{}
		for _, m := range page.Messages {
			if m.Kind == chat.KindNormal {
				continue
			}
			b, _ := json.Marshal(m.Parts)
			id := ided.FindStringSubmatch(string(b))
			if strings.Contains(string(b), "contextd_expand") || id == nil || labels != nil && strings.Contains(string(b), "ExpandMessage") {
				t.Fatalf("%s %s names no id in the wording %q: %s", m.Kind, m.ID, named, b)
			}
			if m.Kind == chat.KindSummary && id[1] != m.ID {
				t.Errorf("summary %s names %q", m.ID, id[1])
			}
			a, err := e.ExpandToolCall(ctx, tenant, v.ID, `{"id":"`+id[1]+`","length":300}`, 1)
			if err != nil || a.IsError {
				t.Errorf("%s %s: expanding %q with the option on: %+v, %v", m.Kind, m.ID, id[1], a, err)
			}
			kinds[m.Kind]++
		}
		if kinds[chat.KindSummary] == 0 || kinds[chat.KindPlaceholder] == 0 {
			t.Errorf("the view holds %v: want summaries and placeholders", kinds)
		}
	})
}
