package gateway_test

import (
	"net/http"
	"slices"
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

var lsCall = gatewaytest.ToolCall{ID: "call_ls", Name: "ls", Arguments: `{"path":"src"}`}

// TestOpenAIGoSDK drives Chat Completions with openai-go, streamed and not,
// through a tool call: the SDK parses every answer, the history it resends
// lands in one session, and the upstream saw valid requests.
func TestOpenAIGoSDK(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			s := start(t, nil)
			s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{lsCall}}, gatewaytest.Reply{Text: "src holds main.go"})
			client := openai.NewClient(ooption.WithBaseURL(s.url("/v1/")), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0))
			params := openai.ChatCompletionNewParams{
				Model:    "gpt-4o",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("What is in src?")},
				Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
					Name: "ls", Description: openai.String("list a directory"),
					Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
				})},
			}
			var sessions []string
			ask := func() openai.ChatCompletionMessage {
				t.Helper()
				var resp *http.Response
				if !stream {
					c, err := client.Chat.Completions.New(t.Context(), params, ooption.WithResponseInto(&resp))
					if err != nil {
						t.Fatal(err)
					}
					sessions = append(sessions, resp.Header.Get("X-Contextd-Session"))
					return c.Choices[0].Message
				}
				st := client.Chat.Completions.NewStreaming(t.Context(), params, ooption.WithResponseInto(&resp))
				acc := openai.ChatCompletionAccumulator{}
				for st.Next() {
					chunk := st.Current()
					if len(chunk.Choices) == 0 {
						t.Errorf("the client got a usage chunk it did not ask for: %s", chunk.RawJSON())
					}
					acc.AddChunk(chunk)
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
				sessions = append(sessions, resp.Header.Get("X-Contextd-Session"))
				return acc.Choices[0].Message
			}
			m := ask()
			if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != lsCall.Arguments {
				t.Fatalf("tool call: %+v", m.ToolCalls)
			}
			params.Messages = append(params.Messages, m.ToParam(), openai.ToolMessage("main.go", m.ToolCalls[0].ID))
			if m = ask(); m.Content != "src holds main.go" {
				t.Fatalf("answer %q", m.Content)
			}
			if sessions[0] == "" || sessions[1] != "" { // the second call is found by its history: not named
				t.Fatalf("sessions %q", sessions)
			}
			want := []string{"user: What is in src?", "assistant: call(call_ls)", "tool: result(call_ls)", "assistant: src holds main.go"}
			if got := s.waitLog(sessions[0], want); !slices.Equal(got, want) {
				t.Errorf("log:\n got %q\nwant %q", got, want)
			}
			s.checkUpstream()
			if stream {
				// The gateway asked for the usage chunk to record usage.
				if !strings.Contains(string(s.fake.Requests()[0].Raw), `"include_usage":true`) {
					t.Errorf("stream_options.include_usage not asked upstream: %s", s.fake.Requests()[0].Raw)
				}
			}
			s.checkLedger(sessions[0])
		})
	}
}

// TestOpenAIGoSDKResponses drives the Responses API with openai-go.
func TestOpenAIGoSDKResponses(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			s := start(t, nil)
			s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{lsCall}, Thinking: "look first"}, gatewaytest.Reply{Text: "src holds main.go"})
			client := openai.NewClient(ooption.WithBaseURL(s.url("/v1/")), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0))
			input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("What is in src?", responses.EasyInputMessageRoleUser)}
			var sessions []string
			ask := func() *responses.Response {
				t.Helper()
				params := responses.ResponseNewParams{Model: "gpt-4o", Instructions: openai.String("You are terse."),
					Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
				var resp *http.Response
				if !stream {
					r, err := client.Responses.New(t.Context(), params, ooption.WithResponseInto(&resp))
					if err != nil {
						t.Fatal(err)
					}
					sessions = append(sessions, resp.Header.Get("X-Contextd-Session"))
					return r
				}
				st := client.Responses.NewStreaming(t.Context(), params, ooption.WithResponseInto(&resp))
				var done *responses.Response
				for st.Next() {
					if ev := st.Current(); ev.Type == "response.completed" {
						r := ev.AsResponseCompleted().Response
						done = &r
					}
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
				if done == nil {
					t.Fatal("no response.completed event")
				}
				sessions = append(sessions, resp.Header.Get("X-Contextd-Session"))
				return done
			}
			r := ask()
			var call *responses.ResponseFunctionToolCall
			for _, item := range r.Output {
				switch item.Type {
				case "function_call":
					fc := item.AsFunctionCall()
					call = &fc
					input = append(input, responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name))
				case "reasoning":
					input = append(input, responses.ResponseInputItemUnionParam{OfReasoning: new(item.AsReasoning().ToParam())})
				}
			}
			if call == nil || call.CallID != lsCall.ID {
				t.Fatalf("no function call in %s", r.RawJSON())
			}
			out := responses.ResponseInputItemParamOfFunctionCallOutput("main.go")
			out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
			input = append(input, out)
			if r = ask(); r.OutputText() != "src holds main.go" {
				t.Fatalf("answer %q", r.OutputText())
			}
			if sessions[0] == "" || sessions[1] != "" { // the second call is found by its history: not named
				t.Fatalf("sessions %q", sessions)
			}
			want := []string{"user: What is in src?", "assistant: call(call_ls)", "tool: result(call_ls)", "assistant: src holds main.go"}
			if got := s.waitLog(sessions[0], want); !slices.Equal(got, want) {
				t.Errorf("log:\n got %q\nwant %q", got, want)
			}
			s.checkUpstream()
			// The reasoning item went back upstream verbatim, before its call.
			last := string(s.fake.Requests()[1].Raw)
			if !strings.Contains(last, `"encrypted_content":"enc:look first"`) || strings.Index(last, `"reasoning"`) > strings.Index(last, `"function_call"`) {
				t.Errorf("reasoning item not carried in order: %s", last)
			}
			s.checkLedger(sessions[0])
		})
	}
}

// TestAnthropicGoSDK drives Messages with anthropic-sdk-go, streamed and
// not, with thinking and a tool call.
func TestAnthropicGoSDK(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			s := start(t, nil)
			s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{lsCall}, Thinking: "look first"}, gatewaytest.Reply{Text: "src holds main.go"})
			client := anthropic.NewClient(aoption.WithBaseURL(s.url("/")), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
			params := anthropic.MessageNewParams{
				Model: "claude-sonnet-4-5", MaxTokens: 1024,
				System:   []anthropic.TextBlockParam{{Text: "You are terse."}},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is in src?"))},
				Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "ls", Description: anthropic.String("list a directory"),
					InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}}}}},
			}
			var sessions []string
			ask := func() anthropic.Message {
				t.Helper()
				var resp *http.Response
				if !stream {
					m, err := client.Messages.New(t.Context(), params, aoption.WithResponseInto(&resp))
					if err != nil {
						t.Fatal(err)
					}
					sessions = append(sessions, resp.Header.Get("X-Contextd-Session"))
					return *m
				}
				st := client.Messages.NewStreaming(t.Context(), params, aoption.WithResponseInto(&resp))
				var acc anthropic.Message
				for st.Next() {
					if err := acc.Accumulate(st.Current()); err != nil {
						t.Fatal(err)
					}
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
				sessions = append(sessions, resp.Header.Get("X-Contextd-Session"))
				return acc
			}
			m := ask()
			var use *anthropic.ToolUseBlock
			for _, b := range m.Content {
				if b.Type == "tool_use" {
					tu := b.AsToolUse()
					use = &tu
				}
			}
			if use == nil || use.ID != lsCall.ID || string(use.Input) != lsCall.Arguments {
				t.Fatalf("tool use: %s", m.RawJSON())
			}
			params.Messages = append(params.Messages, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "main.go", false)))
			if m = ask(); len(m.Content) == 0 || m.Content[0].Text != "src holds main.go" {
				t.Fatalf("answer %s", m.RawJSON())
			}
			if sessions[0] == "" || sessions[1] != "" { // the second call is found by its history: not named
				t.Fatalf("sessions %q", sessions)
			}
			want := []string{"user: What is in src?", "assistant: call(call_ls)", "tool: result(call_ls)", "assistant: src holds main.go"}
			if got := s.waitLog(sessions[0], want); !slices.Equal(got, want) {
				t.Errorf("log:\n got %q\nwant %q", got, want)
			}
			s.checkUpstream()
			last := string(s.fake.Requests()[1].Raw)
			if !strings.Contains(last, `"signature":"sig-look first"`) {
				t.Errorf("thinking block not carried back: %s", last)
			}
			if n := strings.Count(last, `"cache_control"`); n == 0 {
				t.Errorf("no cache_control placed: %s", last)
			}
			s.checkLedger(sessions[0])
		})
	}
}
