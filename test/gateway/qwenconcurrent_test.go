package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestConcurrentQwenCompressionsOfOneOpening: conversations without a
// signal with the same opening (Qwen Code's system prompt, the same task,
// and the same first call), each then its own tool rounds, compress their
// histories before the person's next prompt at the same time, as Qwen Code
// does (its summary request with the whole history, then the summary, its
// resume trailer, the acknowledgement and the prompt: no call kept), and
// go on. Every summary request is an aside, every compacted history is the
// client compaction of its own conversation's session (found by the
// summary it starts with), and no session holds two conversations' words:
// none takes another's summary. The fake answers each request by what it
// carries (its conversation's mark in the tool results), so that answers
// of requests at once are not handed to whichever came first.
func TestConcurrentQwenCompressionsOfOneOpening(t *testing.T) {
	const n, rounds = 6, 3
	mark := regexp.MustCompile(`conv#(\d+)#`)
	summaryOf := func(i int) string {
		return fmt.Sprintf("<overall_goal>Fix the failing tests.</overall_goal> Conversation %d read files %d to %d; its own fix is in handler%d.", i, i, i+rounds, i)
	}
	bothStores(t, func(t *testing.T, s *server) {
		s.fake.Set(func(f *gatewaytest.Fake) {
			f.Answer = func(raw []byte) (gatewaytest.Reply, bool) {
				m := mark.FindSubmatch(raw)
				switch {
				case m == nil: // the opening, the same for all
					return gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{ID: "call_open", Name: "read_file", Arguments: `{"path":"a.go"}`}}}, true
				case strings.Contains(string(raw), "tool execution is disabled for this request"): // the directive (its <> escaped in JSON)
					i, _ := strconv.Atoi(string(m[1]))
					return gatewaytest.Reply{Text: "<analysis>read it all</analysis>\n<state_snapshot>" + summaryOf(i) + "</state_snapshot>"}, true
				default:
					i, _ := strconv.Atoi(string(m[1]))
					k := strings.Count(string(raw), `"role":"tool"`)
					if k >= rounds {
						return gatewaytest.Reply{Text: fmt.Sprintf("Conversation %d: all checks pass.", i)}, true
					}
					id := fmt.Sprintf("call_%d_%d", i, k)
					return gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{ID: id, Name: "read_file", Arguments: `{"path":"` + id + `.go"}`}}}, true
				}
			}
		})
		defer s.fake.Set(func(f *gatewaytest.Fake) { f.Answer = nil })
		type conv struct {
			msgs []any
			last map[string]any // the latest answer's message
		}
		convs := make([]*conv, n)
		for i := range convs {
			convs[i] = &conv{msgs: []any{
				map[string]any{"role": "system", "content": "You are Qwen Code, an interactive CLI agent."},
				map[string]any{"role": "user", "content": "Fix the failing tests in this repository."},
			}}
		}
		// send posts c's history and returns the answer's history header.
		send := func(c *conv, msgs []any) (string, error) {
			resp, out, err := s.send("/v1/chat/completions", map[string]any{"model": "gpt-4o", "messages": msgs}, nil)
			if err != nil {
				return "", err
			}
			if resp.StatusCode != http.StatusOK {
				return "", fmt.Errorf("%d %s", resp.StatusCode, out)
			}
			var a struct {
				Choices []struct {
					Message map[string]any `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(out, &a); err != nil || len(a.Choices) == 0 {
				return "", fmt.Errorf("answer %s", out)
			}
			c.last = a.Choices[0].Message
			return resp.Header.Get("X-Contextd-History"), nil
		}
		// all runs step for every conversation at once, and fails the
		// test with each conversation's error.
		all := func(what string, step func(i int, c *conv) error) {
			t.Helper()
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i, c := range convs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = step(i, c)
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("%s, conversation %d: %v", what, i, err)
				}
			}
		}
		for r := range rounds + 1 {
			all(fmt.Sprintf("round %d", r), func(i int, c *conv) error {
				if r > 0 {
					calls, _ := c.last["tool_calls"].([]any)
					if len(calls) != 1 {
						return fmt.Errorf("the answer has no call: %v", c.last)
					}
					id, _ := calls[0].(map[string]any)["id"].(string)
					c.msgs = append(c.msgs, c.last, map[string]any{"role": "tool", "tool_call_id": id,
						"content": fmt.Sprintf("conv#%d#\n%s", i, bigResult(i*10+r))})
				}
				_, err := send(c, c.msgs)
				return err
			})
		}
		all("the summary requests", func(i int, c *conv) error {
			c.msgs = append(c.msgs, c.last)
			ask := append(slices.Clone(c.msgs), map[string]any{"role": "user", "content": qwenDirective})
			if h, err := send(c, ask); err != nil || h != "aside" {
				return fmt.Errorf("history %q, %v; want aside", h, err)
			}
			return nil
		})
		all("the compacted histories", func(i int, c *conv) error {
			c.msgs = []any{c.msgs[0],
				map[string]any{"role": "user", "content": "<state_snapshot>" + summaryOf(i) + "</state_snapshot>\n\n" + qwenTrailer},
				map[string]any{"role": "assistant", "content": "Got it. Thanks for the additional context!"},
				map[string]any{"role": "user", "content": fmt.Sprintf("conv#%d# Now add a test for handler%d.", i, i)},
			}
			if h, err := send(c, c.msgs); err != nil || h != "compacted" {
				return fmt.Errorf("history %q, %v; want compacted", h, err)
			}
			return nil
		})
		all("the next prompts", func(i int, c *conv) error {
			c.msgs = append(c.msgs, c.last, map[string]any{"role": "user", "content": fmt.Sprintf("conv#%d# And the docs.", i)})
			if h, err := send(c, c.msgs); err != nil || h != "extended" {
				return fmt.Errorf("history %q, %v; want extended", h, err)
			}
			return nil
		})
		// Each conversation's prompt is in one session, with its own
		// rounds and summary, and no other conversation's.
		home := map[int]string{}
		for id, log := range s.sessionLogs() {
			all := strings.Join(log, "\n")
			whose := map[int]bool{}
			for _, m := range mark.FindAllStringSubmatch(all, -1) {
				i, _ := strconv.Atoi(m[1])
				whose[i] = true
			}
			if len(whose) > 1 {
				t.Errorf("session %s holds conversations %v", id, slices.Sorted(mapsKeys(whose)))
			}
			for i := range n {
				if strings.Contains(all, fmt.Sprintf("Now add a test for handler%d.", i)) {
					if home[i] != "" {
						t.Errorf("conversation %d's prompt is in sessions %s and %s", i, home[i], id)
					}
					home[i] = id
					if !strings.Contains(all, fmt.Sprintf("call_%d_1", i)) || !strings.Contains(all, summaryOf(i)) {
						t.Errorf("session %s holds conversation %d's prompt without its rounds or its summary:\n%s", id, i, all)
					}
				}
			}
		}
		if len(home) != n {
			t.Errorf("%d conversations' prompts found in a session, want %d", len(home), n)
		}
		s.checkUpstream()
	})
}
