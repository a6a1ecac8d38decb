package gateway_test

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// longSystem is a system prompt long enough for OpenAI's automatic
// prompt cache (1,024 tokens and more), as a coding agent's is.
func longSystem() string {
	var b strings.Builder
	for i := range 220 {
		fmt.Fprintf(&b, "Rule %d: read the file before you edit it, run the tests after, and say what changed. ", i)
	}
	return b.String()
}

// TestUsageAsBilled drives each door with its SDK, JSON and stream,
// through four turns of one conversation while the fake provider caches
// prompts as the providers do (Anthropic: reads and writes at its marks;
// OpenAI: automatic, cached_tokens inside prompt_tokens). The ledger holds
// the fake's bill field by field (uncached input, cache reads, cache
// writes, output), and right after each call the session's used count is
// the provider's count of that request (within 1 %: the reply appended
// since is a few tokens). Before the fix, Anthropic's cache reads and
// writes and OpenAI's cached tokens were counted twice: the ledger's
// input was too big and the used count up to twice the provider's. The
// fake counts 4 bytes a token, so the OpenAI doors use a model contextd
// counts approximately ("fake-coder"): for an exact encoding such a count
// is rightly not an anchor (TestReportFarFromExactCountDoesNotAnchor).
func TestUsageAsBilled(t *testing.T) {
	system := longSystem()
	type door struct {
		name string
		// ask sends the conversation so far plus prompt and answers the
		// session and the reply's text.
		ask func(t *testing.T, s *server, stream bool, prompts, replies []string) (string, string)
	}
	doors := []door{
		{"chat", func(t *testing.T, s *server, stream bool, prompts, replies []string) (string, string) {
			client := openai.NewClient(ooption.WithBaseURL(s.url("/v1/")), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0))
			msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system)}
			for i, p := range prompts {
				msgs = append(msgs, openai.UserMessage(p))
				if i < len(replies) {
					msgs = append(msgs, openai.AssistantMessage(replies[i]))
				}
			}
			params := openai.ChatCompletionNewParams{Model: "fake-coder", Messages: msgs}
			var resp *http.Response
			if !stream {
				c, err := client.Chat.Completions.New(t.Context(), params, ooption.WithResponseInto(&resp))
				if err != nil {
					t.Fatal(err)
				}
				return resp.Header.Get("X-Contextd-Session"), c.Choices[0].Message.Content
			}
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			st := client.Chat.Completions.NewStreaming(t.Context(), params, ooption.WithResponseInto(&resp))
			acc := openai.ChatCompletionAccumulator{}
			for st.Next() {
				acc.AddChunk(st.Current())
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			return resp.Header.Get("X-Contextd-Session"), acc.Choices[0].Message.Content
		}},
		{"responses", func(t *testing.T, s *server, stream bool, prompts, replies []string) (string, string) {
			client := openai.NewClient(ooption.WithBaseURL(s.url("/v1/")), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0))
			var input responses.ResponseInputParam
			for i, p := range prompts {
				input = append(input, responses.ResponseInputItemParamOfMessage(p, responses.EasyInputMessageRoleUser))
				if i < len(replies) {
					input = append(input, responses.ResponseInputItemParamOfMessage(replies[i], responses.EasyInputMessageRoleAssistant))
				}
			}
			params := responses.ResponseNewParams{Model: "fake-coder", Instructions: openai.String(system),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
			var resp *http.Response
			if !stream {
				r, err := client.Responses.New(t.Context(), params, ooption.WithResponseInto(&resp))
				if err != nil {
					t.Fatal(err)
				}
				return resp.Header.Get("X-Contextd-Session"), r.OutputText()
			}
			st := client.Responses.NewStreaming(t.Context(), params, ooption.WithResponseInto(&resp))
			text := ""
			for st.Next() {
				if ev := st.Current(); ev.Type == "response.completed" {
					text = ev.AsResponseCompleted().Response.OutputText()
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			return resp.Header.Get("X-Contextd-Session"), text
		}},
		{"anthropic", func(t *testing.T, s *server, stream bool, prompts, replies []string) (string, string) {
			client := anthropic.NewClient(aoption.WithBaseURL(s.url("/")), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
			var msgs []anthropic.MessageParam
			for i, p := range prompts {
				msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock(p)))
				if i < len(replies) {
					msgs = append(msgs, anthropic.NewAssistantMessage(anthropic.NewTextBlock(replies[i])))
				}
			}
			params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024,
				System: []anthropic.TextBlockParam{{Text: system}}, Messages: msgs}
			var resp *http.Response
			if !stream {
				m, err := client.Messages.New(t.Context(), params, aoption.WithResponseInto(&resp))
				if err != nil {
					t.Fatal(err)
				}
				return resp.Header.Get("X-Contextd-Session"), m.Content[0].Text
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
			return resp.Header.Get("X-Contextd-Session"), acc.Content[0].Text
		}},
	}
	for _, d := range doors {
		for _, stream := range []bool{false, true} {
			t.Run(d.name+"/"+map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
				s := start(t, nil)
				var prompts, replies []string
				session := ""
				cached := int64(0)
				for turn := range 4 {
					reply := fmt.Sprintf("turn %d done", turn)
					s.fake.Script(gatewaytest.Reply{Text: reply})
					prompts = append(prompts, fmt.Sprintf("Turn %d: fix the next failing test in calc.py.", turn))
					id, text := d.ask(t, s, stream, prompts, replies)
					if id == "" && session != "" {
						// Found by its history: the header names only a
						// session the request made (or the caller named);
						// a new one here would be named, and differ.
						id = session
					}
					if text != reply || id == "" || session != "" && id != session {
						t.Fatalf("turn %d: reply %q in session %q (first %q)", turn, text, id, session)
					}
					session = id
					replies = append(replies, reply)
					reqs := s.fake.Requests()
					bill := reqs[len(reqs)-1].Bill
					cached += bill.CacheRead + bill.CacheWrite
					used := s.used(id, 2*len(prompts))
					if off := math.Abs(float64(used-bill.Input())) / float64(bill.Input()); off > 0.01 {
						t.Errorf("turn %d: used %d tokens after the call; the provider counted %d (%+v): %.1f%% off", turn, used, bill.Input(), bill, 100*off)
					}
				}
				if cached == 0 {
					t.Fatalf("the fake cached nothing: the test tests nothing")
				}
				s.checkUpstream()
				s.checkLedger(session)
			})
		}
	}
}

// used is the session's used token count once its log holds n messages
// (the gateway records the reply, after the report, just after relaying it).
func (s *server) used(id string, n int) int64 {
	s.t.Helper()
	var got struct {
		Session struct {
			LogCount string `json:"logCount"`
			Usage    struct {
				Used string `json:"usedTokens"`
			} `json:"usage"`
		} `json:"session"`
	}
	for range 500 {
		s.rpc("GetSession", map[string]any{"sessionId": id}, &got)
		if c, _ := strconv.Atoi(got.Session.LogCount); c >= n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	v, _ := strconv.ParseInt(got.Session.Usage.Used, 10, 64)
	return v
}
