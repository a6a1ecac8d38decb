package gateway_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// answered is what a client got for one request.
type answered struct {
	text   string      // the answer's text
	callID string      // its tool call, if any
	header http.Header // the response's headers
	raw    string      // every byte of the answer the SDK saw (bodies, events)
}

// agent is an SDK client of one door that keeps its conversation, as an
// agent resends it.
type agent interface {
	ask(t *testing.T) answered // sends the conversation, appends the answer
	// try is ask that returns the SDK's error instead of failing.
	try(t *testing.T) (answered, error)
	result(callID, content string)
	user(text string)
}

// bigOutput is a tool output larger than two of contextd_expand's 16 KiB
// ranges, with multi-byte characters so a range boundary can fall inside
// one.
func bigOutput() string {
	var b strings.Builder
	for i := 0; b.Len() < 40000; i++ {
		fmt.Fprintf(&b, "src/pkg%04d/file.go  %6d bytes  ünïcødé ✓ — line %d\n", i, 1000+i*7, i)
	}
	return b.String()
}

// expandSetup runs an agent through a tool call whose output is big, turns
// the session's expose_expand_tool on, prunes the output, and returns the
// session: the next request's view holds a placeholder that names the id to
// pass contextd_expand.
func expandSetup(t *testing.T, s *server, a agent, big string) string {
	t.Helper()
	s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{lsCall}}, gatewaytest.Reply{Text: "listed"})
	first := a.ask(t)
	if first.callID != lsCall.ID {
		t.Fatalf("first answer: %+v", first)
	}
	a.result(first.callID, big)
	if got := a.ask(t); got.text != "listed" {
		t.Fatalf("second answer: %+v", got)
	}
	id := first.header.Get("X-Contextd-Session")
	s.waitLog(id, []string{"user: What is in src?", "assistant: call(call_ls)", "tool: result(call_ls)", "assistant: listed"})
	s.rpc("UpdateSession", map[string]any{"sessionId": id, "updateMask": "policy",
		"policy": map[string]any{"exposeExpandTool": true, "protectRecentToolResults": 0}}, nil)
	var c struct {
		Compacted bool `json:"compacted"`
	}
	s.rpc("Compact", map[string]any{"sessionId": id, "tier": "COMPACTION_TIER_PRUNE", "target": 0.01}, &c)
	if !c.Compacted {
		t.Fatal("the prune compacted nothing")
	}
	return id
}

// TestExpandLoop: through each door, JSON and stream, with the SDKs, a
// model that calls contextd_expand on the placeholder of a pruned output
// reads it whole (range after range, byte for byte) while the client gets
// only the final answer; every upstream call is in the ledger, the reply
// in the log, and the client's next request extends the session.
func TestExpandLoop(t *testing.T) {
	big := bigOutput()
	doors := map[string]func(s *server, stream bool) agent{
		"chat": newChatAgent, "responses": newResponsesAgent, "anthropic": newAnthropicAgent,
	}
	for _, door := range []string{"chat", "responses", "anthropic"} {
		for _, stream := range []bool{false, true} {
			t.Run(door+"/"+map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
				s := start(t, nil)
				a := doors[door](s, stream)
				id := expandSetup(t, s, a, big)
				before := len(s.fake.Requests())
				s.fake.Set(func(f *gatewaytest.Fake) { f.Expand = gatewaytest.ExpandOnce })
				a.user("Show me that listing again.")
				got := a.ask(t)
				reqs := s.fake.Requests()
				results := reqs[len(reqs)-1].ExpandResults()
				var read strings.Builder
				for _, r := range results {
					_, text, _ := strings.Cut(r, "\n") // after the note line
					read.WriteString(text)
				}
				if read.String() != big {
					t.Fatalf("the model read %d bytes in %d ranges, not the %d-byte original byte for byte", read.Len(), len(results), len(big))
				}
				if len(results) != 3 || len(reqs)-before != 4 {
					t.Errorf("%d ranges in %d upstream calls, want 3 in 4", len(results), len(reqs)-before)
				}
				want := fmt.Sprintf("read %d bytes of ", len(big))
				if !strings.HasPrefix(got.text, want) || got.callID != "" {
					t.Fatalf("client got %+v, want the final answer %q...", got, want)
				}
				if strings.Contains(got.raw, "contextd_expand") || strings.Contains(fmt.Sprint(got.header), "contextd_expand") {
					t.Errorf("the client saw contextd_expand: %s", got.raw)
				}
				if r := got.header.Get("X-Contextd-Expand-Rounds"); r != "3" {
					t.Errorf("X-Contextd-Expand-Rounds %q", r)
				}
				s.checkUpstream()
				logWant := []string{"user: What is in src?", "assistant: call(call_ls)", "tool: result(call_ls)", "assistant: listed",
					"user: Show me that listing again.", "assistant: " + got.text}
				if log := s.waitLog(id, logWant); !slices.Equal(log, logWant) {
					t.Errorf("log:\n got %q\nwant %q", log, logWant)
				}
				s.checkLedger(id)
				s.fake.Set(func(f *gatewaytest.Fake) { f.Expand = gatewaytest.ExpandOff })
				a.user("Thanks.")
				// The next request extends the session; found by its history,
				// the session is not named (identify.go).
				if next := a.ask(t); next.header.Get("X-Contextd-History") != "extended" || next.header.Get("X-Contextd-Session") != "" {
					t.Errorf("next request: history %q in session %q, want extended in an unnamed session", next.header.Get("X-Contextd-History"), next.header.Get("X-Contextd-Session"))
				}
			})
		}
	}
}

// TestExpandLoopStops: a model that keeps calling contextd_expand is told to
// stop past the round limit, the next request goes without the tool, and
// the client gets that request's answer: 3 rounds answered, the 4th with
// the stop note, 5 upstream calls.
func TestExpandLoopStops(t *testing.T) {
	s := start(t, nil)
	a := newChatAgent(s, false)
	id := expandSetup(t, s, a, bigOutput())
	before := len(s.fake.Requests())
	s.fake.Set(func(f *gatewaytest.Fake) { f.Expand = gatewaytest.ExpandForever })
	s.fake.Script(gatewaytest.Reply{Text: "I stop here."})
	a.user("Read it over and over.")
	got := a.ask(t)
	if got.text != "I stop here." || got.header.Get("X-Contextd-Expand-Rounds") != "4" {
		t.Fatalf("client got %+v", got)
	}
	reqs := s.fake.Requests()[before:]
	if len(reqs) != 5 {
		t.Fatalf("%d upstream calls, want 5 (the first, 3 rounds, the stop note)", len(reqs))
	}
	last := reqs[len(reqs)-1]
	if strings.Contains(fmt.Sprint(last.Body["tools"]), "contextd_expand") {
		t.Errorf("the request after the stop note still offers the tool: %v", last.Body["tools"])
	}
	results := last.ExpandResults()
	if len(results) != 4 || !strings.Contains(results[3], "Do not call contextd_expand again") {
		t.Errorf("results %d, the last %.200q", len(results), results[len(results)-1])
	}
	s.checkUpstream()
	s.checkLedger(id)
}

// TestExpandLoopUpstreamFails: an upstream failure in the middle of the
// loop reaches the client as the provider's error (its text never naming
// contextd_expand), every call the provider billed is in the ledger, and
// no reply is recorded.
func TestExpandLoopUpstreamFails(t *testing.T) {
	s := start(t, nil)
	a := newChatAgent(s, false)
	id := expandSetup(t, s, a, bigOutput())
	logBefore := s.logOf(id)
	n := len(s.fake.Requests())
	s.fake.Set(func(f *gatewaytest.Fake) {
		f.Expand, f.FailFrom, f.FailMessage = gatewaytest.ExpandOnce, n+2, "tool contextd_expand: output too long"
	})
	resp, body := s.post("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": []any{
		map[string]any{"role": "system", "content": "You are terse."},
		map[string]any{"role": "user", "content": "What is in src?"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": lsCall.ID, "type": "function", "function": map[string]any{"name": lsCall.Name, "arguments": lsCall.Arguments}}}},
		map[string]any{"role": "tool", "tool_call_id": lsCall.ID, "content": bigOutput()},
		map[string]any{"role": "assistant", "content": "listed"},
		map[string]any{"role": "user", "content": "Show me that listing again."},
	}, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "ls", "parameters": map[string]any{"type": "object"}}}}}, nil)
	if resp.StatusCode != http.StatusInternalServerError || strings.Contains(string(body), "contextd_expand") || strings.Contains(fmt.Sprint(resp.Header), "contextd_expand") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := len(s.fake.Requests()) - n; got != 2 {
		t.Errorf("%d upstream calls, want 2 (the first, the failed follow-up)", got)
	}
	s.checkLedger(id)                                              // the first call was billed: it is in the ledger
	want := append(logBefore, "user: Show me that listing again.") // the request's own turn is kept, as after any upstream failure
	if got := s.logOf(id); !slices.Equal(got, want) {
		t.Errorf("log:\n got %q\nwant %q", got, want)
	}
}

// TestExpandLoopNeverLeaks: whatever the model does with contextd_expand,
// the client never sees the name (in a choice, an output item, an event,
// an error or a header): a second choice that calls it (n = 2), a call
// without an id, a streamed answer that calls it after the stop note.
func TestExpandLoopNeverLeaks(t *testing.T) {
	expand := func(id string) gatewaytest.ToolCall {
		return gatewaytest.ToolCall{ID: id, Name: "contextd_expand", Arguments: `{"id":"msg_3","length":100}`}
	}
	cases := []struct {
		name   string
		stream bool
		n      int
		script []gatewaytest.Reply
		want   string // the text the client gets
		calls  int    // upstream calls of the turn
	}{
		// Two choices: the second calls the tool (not offered with n > 1).
		{name: "second choice", n: 2, script: []gatewaytest.Reply{
			{Text: "one", More: []gatewaytest.Reply{{ToolCalls: []gatewaytest.ToolCall{expand("call_expand_1")}}}},
			{Text: "two", More: []gatewaytest.Reply{{Text: "three"}}}}, want: "two", calls: 2},
		{name: "second choice/stream", stream: true, n: 2, script: []gatewaytest.Reply{
			{Text: "one", More: []gatewaytest.Reply{{ToolCalls: []gatewaytest.ToolCall{expand("call_expand_1")}}}},
			{Text: "two", More: []gatewaytest.Reply{{Text: "three"}}}}, want: "two", calls: 2},
		// A call without an id (OpenAI-compatible servers): answered, with
		// an id of the gateway's.
		{name: "no id", script: []gatewaytest.Reply{{ToolCalls: []gatewaytest.ToolCall{expand("")}}, {Text: "read it"}}, want: "read it", calls: 2},
		{name: "no id/stream", stream: true, script: []gatewaytest.Reply{{ToolCalls: []gatewaytest.ToolCall{expand("")}}, {Text: "read it"}}, want: "read it", calls: 2},
		// Called past the stop note (the tool no longer offered): the
		// model is asked once more with the view alone.
		{name: "after stop/stream", stream: true, script: []gatewaytest.Reply{
			{ToolCalls: []gatewaytest.ToolCall{expand("call_expand_1")}}, {ToolCalls: []gatewaytest.ToolCall{expand("call_expand_2")}},
			{ToolCalls: []gatewaytest.ToolCall{expand("call_expand_3")}}, {ToolCalls: []gatewaytest.ToolCall{expand("call_expand_4")}},
			{ToolCalls: []gatewaytest.ToolCall{expand("call_expand_5")}}, {Text: "without it"}}, want: "without it", calls: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, nil)
			a := newChatAgent(s, tc.stream).(*chatAgent)
			expandSetup(t, s, a, bigOutput())
			s.fake.Reset()
			s.fake.Script(tc.script...)
			if tc.n > 0 {
				a.params.N = openai.Int(int64(tc.n))
			}
			a.user("Show me that listing again.")
			got := a.ask(t)
			if strings.Contains(got.raw, "contextd_expand") || strings.Contains(fmt.Sprint(got.header), "contextd_expand") {
				t.Errorf("the client saw contextd_expand: %.600s", got.raw)
			}
			if got.text != tc.want || got.callID != "" {
				t.Errorf("client got %q (call %q), want %q", got.text, got.callID, tc.want)
			}
			if reqs := s.fake.Requests(); len(reqs) != tc.calls {
				t.Errorf("%d upstream calls, want %d", len(reqs), tc.calls)
			}
			s.checkUpstream()
		})
	}
}

// TestExpandLoopManyCalls: an answer with far more contextd_expand calls
// than a round answers gets the first ones run and a "not run" note for
// the rest.
func TestExpandLoopManyCalls(t *testing.T) {
	s := start(t, nil)
	a := newChatAgent(s, false)
	expandSetup(t, s, a, bigOutput())
	s.fake.Reset()
	var calls []gatewaytest.ToolCall
	for i := range 200 {
		calls = append(calls, gatewaytest.ToolCall{ID: fmt.Sprintf("call_expand_%d", i+1), Name: "contextd_expand", Arguments: `{"id":"msg_3","length":10}`})
	}
	s.fake.Script(gatewaytest.Reply{ToolCalls: calls}, gatewaytest.Reply{Text: "done"})
	a.user("Read it all at once.")
	if got := a.ask(t); got.text != "done" || strings.Contains(got.raw, "contextd_expand") {
		t.Fatalf("client got %+v", got)
	}
	reqs := s.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d upstream calls, want 2", len(reqs))
	}
	results := reqs[1].ExpandResults()
	run, notRun := 0, 0
	for _, r := range results {
		if strings.Contains(r, "was not run") {
			notRun++
		} else {
			run++
		}
	}
	if len(results) != 200 || run != 8 || notRun != 192 {
		t.Errorf("%d results: %d run, %d not run; want 8 run, 192 not run", len(results), run, notRun)
	}
	s.checkUpstream()
}

var lsTool = shared.FunctionDefinitionParam{Name: "ls", Description: openai.String("list a directory"),
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}

type chatAgent struct {
	client openai.Client
	stream bool
	params openai.ChatCompletionNewParams
}

func newChatAgent(s *server, stream bool) agent {
	return &chatAgent{stream: stream,
		client: openai.NewClient(ooption.WithBaseURL(s.url("/v1/")), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0)),
		params: openai.ChatCompletionNewParams{Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("What is in src?")},
			Tools:    []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(lsTool)}}}
}

func (a *chatAgent) ask(t *testing.T) answered {
	t.Helper()
	out, err := a.try(t)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (a *chatAgent) try(t *testing.T) (answered, error) {
	t.Helper()
	var resp *http.Response
	var m openai.ChatCompletionMessage
	var raw strings.Builder
	if !a.stream {
		c, err := a.client.Chat.Completions.New(t.Context(), a.params, ooption.WithResponseInto(&resp))
		if err != nil {
			return answered{}, err
		}
		raw.WriteString(c.RawJSON())
		m = c.Choices[0].Message
	} else {
		st := a.client.Chat.Completions.NewStreaming(t.Context(), a.params, ooption.WithResponseInto(&resp))
		acc := openai.ChatCompletionAccumulator{}
		for st.Next() {
			raw.WriteString(st.Current().RawJSON())
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			return answered{}, err
		}
		m = acc.Choices[0].Message
	}
	a.params.Messages = append(a.params.Messages, m.ToParam())
	out := answered{text: m.Content, header: resp.Header, raw: raw.String()}
	if len(m.ToolCalls) > 0 {
		out.callID = m.ToolCalls[0].ID
	}
	return out, nil
}

func (a *chatAgent) result(id, content string) {
	a.params.Messages = append(a.params.Messages, openai.ToolMessage(content, id))
}

func (a *chatAgent) user(text string) {
	a.params.Messages = append(a.params.Messages, openai.UserMessage(text))
}

type responsesAgent struct {
	client openai.Client
	stream bool
	input  responses.ResponseInputParam
}

func newResponsesAgent(s *server, stream bool) agent {
	return &responsesAgent{stream: stream,
		client: openai.NewClient(ooption.WithBaseURL(s.url("/v1/")), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0)),
		input:  responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("What is in src?", responses.EasyInputMessageRoleUser)}}
}

func (a *responsesAgent) ask(t *testing.T) answered {
	t.Helper()
	out, err := a.try(t)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (a *responsesAgent) try(t *testing.T) (answered, error) {
	t.Helper()
	params := responses.ResponseNewParams{Model: "gpt-4o", Instructions: openai.String("You are terse."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: a.input},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "ls", Parameters: lsTool.Parameters}}}}
	var resp *http.Response
	var r *responses.Response
	var raw strings.Builder
	if !a.stream {
		var err error
		if r, err = a.client.Responses.New(t.Context(), params, ooption.WithResponseInto(&resp)); err != nil {
			return answered{}, err
		}
		raw.WriteString(r.RawJSON())
	} else {
		st := a.client.Responses.NewStreaming(t.Context(), params, ooption.WithResponseInto(&resp))
		for st.Next() {
			ev := st.Current()
			raw.WriteString(ev.RawJSON())
			if ev.Type == "response.completed" {
				done := ev.AsResponseCompleted().Response
				r = &done
			}
		}
		if err := st.Err(); err != nil {
			return answered{}, err
		}
		if r == nil {
			return answered{}, errors.New("no response.completed event")
		}
	}
	out := answered{text: r.OutputText(), header: resp.Header, raw: raw.String()}
	for _, item := range r.Output {
		switch item.Type {
		case "function_call":
			fc := item.AsFunctionCall()
			out.callID = fc.CallID
			a.input = append(a.input, responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name))
		case "message":
			a.input = append(a.input, responses.ResponseInputItemParamOfMessage(r.OutputText(), responses.EasyInputMessageRoleAssistant))
		}
	}
	return out, nil
}

func (a *responsesAgent) result(id, content string) {
	out := responses.ResponseInputItemParamOfFunctionCallOutput(content)
	out.OfFunctionCallOutput.CallID = openai.String(id)
	a.input = append(a.input, out)
}

func (a *responsesAgent) user(text string) {
	a.input = append(a.input, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
}

type anthropicAgent struct {
	client anthropic.Client
	stream bool
	params anthropic.MessageNewParams
}

func newAnthropicAgent(s *server, stream bool) agent {
	return &anthropicAgent{stream: stream,
		client: anthropic.NewClient(aoption.WithBaseURL(s.url("/")), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0)),
		params: anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024,
			System:   []anthropic.TextBlockParam{{Text: "You are terse."}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is in src?"))},
			Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "ls", Description: anthropic.String("list a directory"),
				InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}}}}}}}
}

func (a *anthropicAgent) ask(t *testing.T) answered {
	t.Helper()
	out, err := a.try(t)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (a *anthropicAgent) try(t *testing.T) (answered, error) {
	t.Helper()
	var resp *http.Response
	var m anthropic.Message
	var raw strings.Builder
	if !a.stream {
		got, err := a.client.Messages.New(t.Context(), a.params, aoption.WithResponseInto(&resp))
		if err != nil {
			return answered{}, err
		}
		raw.WriteString(got.RawJSON())
		m = *got
	} else {
		st := a.client.Messages.NewStreaming(t.Context(), a.params, aoption.WithResponseInto(&resp))
		for st.Next() {
			raw.WriteString(st.Current().RawJSON())
			if err := m.Accumulate(st.Current()); err != nil {
				return answered{}, err
			}
		}
		if err := st.Err(); err != nil {
			return answered{}, err
		}
	}
	a.params.Messages = append(a.params.Messages, m.ToParam())
	out := answered{header: resp.Header, raw: raw.String()}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			out.text += b.Text
		case "tool_use":
			out.callID = b.ID
		}
	}
	return out, nil
}

func (a *anthropicAgent) result(id, content string) {
	a.params.Messages = append(a.params.Messages, anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, content, false)))
}

func (a *anthropicAgent) user(text string) {
	a.params.Messages = append(a.params.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(text)))
}

// TestExpandLoopMixedCalls: an answer that calls contextd_expand and a
// client tool together is not shown: the expand call is answered, the
// client's call gets a result saying it was not run, and the model is
// asked again; the client sees only the answer after that.
func TestExpandLoopMixedCalls(t *testing.T) {
	s := start(t, nil)
	a := newChatAgent(s, false)
	id := expandSetup(t, s, a, bigOutput())
	s.fake.Reset()
	// msg_3 is the pruned output's id (the log's third message).
	s.fake.Script(
		gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{ID: "call_expand_1", Name: "contextd_expand", Arguments: `{"id":"msg_3","length":100}`}, {ID: "call_ls2", Name: "ls", Arguments: `{"path":"."}`}}},
		gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{ID: "call_ls3", Name: "ls", Arguments: `{"path":"."}`}}})
	a.user("List it again.")
	got := a.ask(t)
	if got.callID != "call_ls3" || strings.Contains(got.raw, "contextd_expand") || got.header.Get("X-Contextd-Expand-Rounds") != "1" {
		t.Fatalf("client got %+v", got)
	}
	reqs := s.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d upstream calls, want 2", len(reqs))
	}
	var ls2, expand string
	for _, m := range reqs[1].Body["messages"].([]any) {
		msg := m.(map[string]any)
		switch msg["tool_call_id"] {
		case "call_ls2":
			ls2, _ = msg["content"].(string)
		case "call_expand_1":
			expand, _ = msg["content"].(string)
		}
	}
	if !strings.Contains(ls2, "was not run") || !strings.HasSuffix(expand, bigOutput()[:100]) {
		t.Errorf("results: ls %q, expand %q", ls2, expand)
	}
	s.checkUpstream()
	want := []string{"user: What is in src?", "assistant: call(call_ls)", "tool: result(call_ls)", "assistant: listed", "user: List it again.", "assistant: call(call_ls3)"}
	if log := s.waitLog(id, want); !slices.Equal(log, want) {
		t.Errorf("log:\n got %q\nwant %q", log, want)
	}
}

// TestExpandLoopWindow: when what a round appends would not fit what the
// view left free of the window, the model gets a note instead of the text
// and the tool is taken away; no upstream request goes over the window.
func TestExpandLoopWindow(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "small", "provider": "openai", "context_window": 20000, "max_output_tokens": 500, "encoding": "o200k_base", "exact": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models, "CONTEXTD_EXPAND_TOOL_BYTES": "262144"})
	// The output is about half the usable window (17,000 tokens), so it
	// fits when it is sent, and its expansion does not once a filler of
	// about 60 % sits beside its placeholder.
	count := func(text string) int64 {
		var c struct {
			TotalTokens string `json:"totalTokens"`
		}
		s.rpc("CountTokens", map[string]any{"model": "small", "text": text}, &c)
		n, _ := strconv.ParseInt(c.TotalTokens, 10, 64)
		return n
	}
	full := bigOutput()
	big := full[:int64(len(full))*8500/count(full)]
	filler := strings.Repeat("filler ", 10200)
	a := newChatAgent(s, false).(*chatAgent)
	a.params.Model = "small"
	id := expandSetup(t, s, a, big)
	before := len(s.fake.Requests())
	s.fake.Set(func(f *gatewaytest.Fake) { f.Expand = gatewaytest.ExpandOnce })
	s.fake.Script(gatewaytest.Reply{Text: "answered without it"})
	a.user(filler + "Show me that listing again.")
	got := a.ask(t)
	if got.text != "answered without it" || strings.Contains(got.raw, "contextd_expand") {
		t.Fatalf("client got %+v (%d tokens of filler, %d of output)", got, count(filler), count(big))
	}
	reqs := s.fake.Requests()[before:]
	last := reqs[len(reqs)-1]
	results := last.ExpandResults()
	if len(reqs) != 2 || len(results) != 1 || !strings.Contains(results[0], "does not fit") || offered(last) {
		t.Errorf("%d upstream calls; results %q; tool still offered: %v", len(reqs), results, offered(last))
	}
	for i, r := range reqs {
		if n := count(string(r.Raw)); n > 20000 {
			t.Errorf("upstream request %d is %d tokens, over the window", i, n)
		}
	}
	s.checkUpstream()
	s.checkLedger(id)
}

// offered reports whether a request lets the model call contextd_expand.
func offered(r gatewaytest.Request) bool {
	return strings.Contains(fmt.Sprint(r.Body["tools"]), "contextd_expand") && r.Body["tool_choice"] != "none"
}

// TestExpandLoopInventedCallIDs: a final round (the expand loop holds it
// whole) whose tool call came without an id reaches the client with the
// gateway's id, JSON and stream, the one the recorded reply has, so the
// client's next turn extends the session (before, the loop's JSON round
// went out with the call's empty id).
func TestExpandLoopInventedCallIDs(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			s := start(t, nil)
			a := newChatAgent(s, stream)
			expandSetup(t, s, a, bigOutput())
			s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{Name: "ls", Arguments: `{"path":"docs"}`}}}, gatewaytest.Reply{Text: "listed docs"})
			a.user("And docs?")
			got := a.ask(t)
			if got.callID == "" {
				t.Fatalf("the client got a tool call without an id: %s", got.raw)
			}
			a.result(got.callID, "README.md")
			if next := a.ask(t); next.header.Get("X-Contextd-History") != "extended" || next.text != "listed docs" {
				t.Fatalf("the next turn: history %q, text %q", next.header.Get("X-Contextd-History"), next.text)
			}
		})
	}
}
