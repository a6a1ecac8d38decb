package engine_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/tokens"
)

// corpusSlack is how far above the target a compaction may leave usage, as a
// fraction of the usable window: the tail is cut at message boundaries, so
// it can overshoot by part of one message.
const corpusSlack = 0.05

type corpusLine struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	Name      string `json:"name"`
	ToolCalls []struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// loadTranscript reads one corpus file: the system prompt and the messages.
func loadTranscript(t *testing.T, path string) (string, []chat.Message) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	system := ""
	var msgs []chat.Message
	for sc.Scan() {
		var l corpusLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		m := chat.Message{Role: chat.Role(l.Role)}
		switch {
		case l.Role == "system" && len(msgs) == 0 && system == "":
			system = l.Content
			continue
		case l.Role == "tool":
			m.Name = ""
			m.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: l.ToolCallID, Content: l.Content}}}
		default:
			if l.Content != "" || len(l.ToolCalls) == 0 {
				m.Parts = append(m.Parts, chat.Part{Type: chat.PartText, Text: l.Content})
			}
			for _, c := range l.ToolCalls {
				m.Parts = append(m.Parts, chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}})
			}
		}
		msgs = append(msgs, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return system, msgs
}

func corpusFiles(t *testing.T) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	files, err := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "..", "testdata", "corpus", "dev", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus transcripts in testdata/corpus/dev: %v", err)
	}
	return files
}

// TestCorpusReplay replays every transcript of the corpus through
// PrepareContext as an agent loop would (one call before each model call)
// with small windows and a "summarize at 65 %" policy, and checks every
// returned view; then it reverts every compaction in reverse order and
// expects the full log back, byte for byte.
func TestCorpusReplay(t *testing.T) {
	models, err := tokens.NewRegistry([]tokens.Model{
		{Name: "corpus-16k", Provider: "test", ContextWindow: 16_384, MaxOutputTokens: 2_048, Encoding: tokens.CL100KBase},
		{Name: "corpus-32k", Provider: "test", ContextWindow: 32_768, MaxOutputTokens: 4_096, Encoding: tokens.CL100KBase},
	})
	if err != nil {
		t.Fatal(err)
	}
	encodings := tokens.NewEncodings()
	th := 0.65
	maxOver, compactions := 0.0, 0
	for _, model := range []string{"corpus-16k", "corpus-32k"} {
		for _, file := range corpusFiles(t) {
			t.Run(model+"/"+filepath.Base(file), func(t *testing.T) {
				st, err := sqlite.Open(t.Context(), t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				e := engine.New(encodings, models, st)
				ctx := t.Context()
				system, msgs := loadTranscript(t, file)
				v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: model, System: system,
					Policy: compaction.Overrides{WarningThreshold: &th, CriticalThreshold: &th}})
				if err != nil {
					t.Fatal(err)
				}
				target := v.Usage.Policy.Target
				usable := v.Usage.ContextWindow - v.Usage.ReservedOutput
				var task chat.Message
				var pending []chat.Message
				step := func() {
					res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: pending})
					if err != nil {
						t.Fatalf("after %d messages: %v", len(msgs), err)
					}
					pending = nil
					u := res.Status.Usage
					if u.Over > 0 || u.Used > usable {
						t.Fatalf("view exceeds the window: %d of %d usable", u.Used, usable)
					}
					if err := compaction.ValidatePairs(res.Messages); err != nil {
						t.Fatalf("invalid view: %v", err)
					}
					// The original task is the first message the person
					// wrote (chat.HumanAuthored; else the first user
					// message): it stays in every view, verbatim, though a
					// framework's scaffolding before it (SWE-agent's
					// demonstration) may be compacted.
					if task.ID == "" {
						task = firstTask(res.Messages)
					}
					if i := slices.IndexFunc(res.Messages, func(m chat.Message) bool { return m.ID == task.ID }); i < 0 || !reflect.DeepEqual(res.Messages[i], task) {
						t.Fatalf("the original task %s changed or left the view", task.ID)
					}
					if res.Status.Compacted {
						compactions++
						// The bound is the target, unless what can never be
						// compacted is larger: the fixed part, the original task,
						// the latest step (from the last user or assistant
						// message on), the person's messages kept verbatim
						// (keep_human_tokens) and a summary at its cap with its
						// trail.
						var viewTokens, latest, human int64
						last := 0
						for i, m := range res.Messages {
							viewTokens += m.Tokens
							if m.Role != chat.RoleTool {
								last = i
							}
						}
						for _, m := range res.Messages[last:] {
							latest += m.Tokens
						}
						for i, h := range chat.HumanAuthoredIn(res.Messages[:last]) {
							if h && i > 0 && res.Messages[i].Kind == chat.KindNormal {
								human += res.Messages[i].Tokens
							}
						}
						floor := (u.Used - viewTokens) + task.Tokens + latest + human +
							int64(u.Policy.SummaryMaxTokens+compaction.TrailBudget(u.Policy, u.ContextWindow))
						bound := max(int64(target*float64(usable)), floor)
						over := float64(u.Used-bound) / float64(usable)
						maxOver = max(maxOver, over)
						if over > corpusSlack {
							t.Errorf("after compaction %s: %d tokens, bound %d (target %d, floor %d) + %.0f%% slack",
								res.Status.LastCompaction.ID, u.Used, bound, int64(target*float64(usable)), floor, 100*corpusSlack)
						}
					}
				}
				for _, m := range msgs {
					if m.Role == chat.RoleAssistant && len(pending) > 0 {
						step() // the model is called before each assistant message
					}
					pending = append(pending, m)
				}
				step()

				list, err := compactionsOf(e, ctx, tenant, v.ID)
				if err != nil {
					t.Fatal(err)
				}
				for i := len(list) - 1; i >= 0; i-- {
					if list[i].RevertedAt != nil {
						continue
					}
					if _, err := e.RevertCompaction(ctx, tenant, v.ID, list[i].ID); err != nil {
						t.Fatalf("revert %s: %v", list[i].ID, err)
					}
				}
				log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{Size: 1000})
				if err != nil {
					t.Fatal(err)
				}
				active, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
				if err != nil {
					t.Fatal(err)
				}
				if len(log.Messages) != len(msgs) || !reflect.DeepEqual(active.Messages, log.Messages) {
					t.Fatalf("after reverting %d compactions: %d active messages, %d in the log, %d appended",
						len(list), len(active.Messages), len(log.Messages), len(msgs))
				}
				t.Logf("%d messages, %d compactions", len(msgs), len(list))
			})
		}
	}
	if compactions == 0 {
		t.Fatal("the corpus never compacted")
	}
	t.Logf("%d automatic compactions; worst usage after one: bound %+.1f%% of the usable window", compactions, 100*maxOver)
}

// firstTask is the view's first human-authored user message, else its
// first user message (the engine's original task).
func firstTask(view []chat.Message) chat.Message {
	first := -1
	for i := range view {
		if view[i].Role != chat.RoleUser || view[i].Kind != "" && view[i].Kind != chat.KindNormal {
			continue
		}
		if chat.HumanAuthored(&view[i]) {
			return view[i]
		}
		if first < 0 {
			first = i
		}
	}
	if first < 0 {
		return chat.Message{}
	}
	return view[first]
}
