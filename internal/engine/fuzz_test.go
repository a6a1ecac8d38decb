package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// sequenceSeeds are the fuzz target's built-in seeds (testdata/fuzz holds
// more); TestSequencesPostgres replays them on PostgreSQL.
var sequenceSeeds = [][]byte{
	{0, 40, 2, 1, 0, 3, 11, 0},                           // user, call, user "stop", prepare
	{0, 200, 2, 2, 4, 90, 0, 9, 2, 1, 11, 0, 6, 0, 7, 0}, // answered and unanswered calls, compact, revert
	{2, 1, 3, 5, 4, 1, 1, 30, 10, 0, 11, 0, 3, 0, 11, 0}, // a call first, results for unknown calls
	{0, 255, 2, 3, 4, 255, 4, 255, 0, 1, 2, 1, 11, 0, 2, 1, 11, 0, 8, 200, 6, 1, 6, 2, 7, 1, 11, 0},
	{9, 10, 5, 255, 5, 255, 5, 255, 11, 0, 2, 2, 1, 10, 11, 0, 6, 3, 7, 0, 7, 0, 11, 0},
	{0, 200, 11, 0, 12, 0, 0, 90, 11, 1, 12, 1, 8, 3, 11, 0, 6, 0},                        // stored before interrupted calls were recorded
	{0, 250, 12, 0, 6, 1, 2, 0, 4, 10, 12, 3, 11, 0, 7, 0, 11, 0, 12, 0},                  // the same around compactions and reverts
	{0, 40, 2, 0, 11, 1, 13, 1, 4, 5, 11, 1, 11, 0, 7, 0, 11, 0},                          // a call open across a clear, its result after it, revert
	{0, 90, 2, 2, 4, 9, 11, 0, 14, 1, 13, 0, 0, 5, 11, 0, 14, 0, 7, 0, 6, 1, 7, 1, 11, 0}, // model changes, clears, compactions, reverts
}

// runSequence interprets data as a script of appends (valid and invalid:
// unanswered calls followed by other turns, results for unknown or
// answered calls, duplicate ids), PrepareContext calls, compactions,
// reverts, clears, session updates (model and system prompt) and usage
// reports against one new session, plus states written straight into the
// store as sessions held them before interrupted calls were recorded, and
// fails on any error the API would answer with Internal, on a
// PrepareContext view that a provider would reject, or (without such
// legacy states) on an active view a provider would reject after an edit.
func runSequence(t *testing.T, ctx context.Context, e *engine.Engine, st store.Store, data []byte) {
	v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: "You are a coding agent.",
		Policy: compaction.Overrides{WarningThreshold: ptr(0.3), CriticalThreshold: ptr(0.4), Target: ptr(0.2)}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err != nil && !clientError(err) {
			t.Fatalf("%s: an error the API answers with Internal: %v", what, err)
		}
	}
	var batch []chat.Message
	var calls []string
	compactions := 0
	legacy := false // a legacy state was written: views may hold gaps until repaired
	edited := func(what string, err error) {
		t.Helper()
		check(what, err)
		if err != nil || legacy {
			return
		}
		view, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: engine.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		if view.Next == "" {
			viewValid(t, what, view.Messages)
		}
	}
	for i := 0; i+1 < len(data); i += 2 {
		op, arg := data[i]%15, int(data[i+1])
		text := strings.Repeat("word ", arg*4+1)
		switch op {
		case 0:
			batch = append(batch, userMsg(text))
		case 1:
			batch = append(batch, chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: text}}})
		case 2: // parallel calls, new ids
			var ids []string
			for k := 0; k <= arg%3; k++ {
				ids = append(ids, fmt.Sprintf("c%d", len(calls)))
				calls = append(calls, ids[len(ids)-1])
			}
			batch = append(batch, callMsg(ids...))
		case 3: // a result for any call, known or not, answered or not
			batch = append(batch, resultMsg(fmt.Sprintf("c%d", arg%(len(calls)+2)), text))
		case 4: // the result of the newest call
			if len(calls) > 0 {
				batch = append(batch, resultMsg(calls[len(calls)-1], text))
			}
		case 5: // a reused call id
			if len(calls) > 0 {
				batch = append(batch, callMsg(calls[arg%len(calls)]))
			}
		case 9:
			batch = append(batch, chat.Message{Role: chat.RoleSystem, Parts: []chat.Part{{Type: chat.PartText, Text: text}}})
		case 10:
			m := userMsg(text)
			m.Pinned = true
			batch = append(batch, m)
		case 11: // flush: PrepareContext, or AppendMessages for odd args
			var err error
			if arg%2 == 1 && len(batch) > 0 {
				_, err = e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: batch})
				check("append", err)
			} else {
				var res engine.PrepareResult
				res, err = e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: batch})
				check("prepare", err)
				if err == nil {
					providerValid(t, res.Messages)
				}
			}
			batch = nil
		case 6:
			tiers := append([]compaction.Tier{""}, compaction.AllTiers...)
			res, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: tiers[arg%len(tiers)], DryRun: arg%5 == 4})
			check("compact", err)
			if err == nil && res.Compacted {
				compactions++
			}
		case 7:
			_, err := e.RevertCompaction(ctx, tenant, v.ID, fmt.Sprintf("cmp_%d", 1+arg%(compactions+1)))
			edited("revert", err)
		case 13: // clear, keeping the task for odd args
			res, err := e.ClearMessages(ctx, tenant, v.ID, arg%2 == 1, nil)
			if err == nil && res.Compaction != nil {
				compactions++
			}
			edited("clear", err)
		case 14: // another model (other encoding and window) or system prompt
			models := []string{"gpt-4", "gpt-4o", "gpt-3.5-turbo"}
			_, err := e.UpdateSession(ctx, tenant, v.ID, engine.SessionUpdate{Mask: []string{engine.FieldModel, engine.FieldSystemPrompt},
				Model: models[arg%len(models)], System: text})
			edited("update", err)
		case 12: // a legacy unanswered call, with its result recorded late for odd args
			legacy = true
			calls = append(calls, fmt.Sprintf("c%d", len(calls)))
			writeLegacyInterrupted(t, ctx, st, v.ID, calls[len(calls)-1], text, arg%2 == 1)
		case 8:
			n := int64(arg % 7)
			_, err := e.ReportUsage(ctx, tenant, v.ID, engine.ReportInput{InputTokens: int64(arg) * 37, MessageCount: &n})
			check("report usage", err)
		}
	}
	for _, tier := range append([]compaction.Tier{""}, compaction.AllTiers...) {
		_, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: tier})
		check("final compact", err)
	}
	res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{})
	check("final prepare", err)
	if err == nil {
		providerValid(t, res.Messages)
	}
}

// providerValid fails on a view providers reject: tool calls and results
// unpaired, or a call's result not among the tool messages right after it
// (only the last assistant message's calls may still be pending).
func providerValid(t *testing.T, view []chat.Message) {
	t.Helper()
	viewValid(t, "PrepareContext", view)
}

// viewValid is providerValid for the view after what.
func viewValid(t *testing.T, what string, view []chat.Message) {
	t.Helper()
	if err := compaction.ValidatePairs(view); err != nil {
		t.Fatalf("%s left a view providers reject: %v", what, err)
	}
	for i, m := range view {
		if m.Role != chat.RoleAssistant {
			continue
		}
		answered := map[string]bool{}
		j := i + 1
		for ; j < len(view) && view[j].Role == chat.RoleTool; j++ {
			for _, p := range view[j].Parts {
				if p.Type == chat.PartToolResult {
					answered[p.ToolResult.ToolCallID] = true
				}
			}
		}
		for _, p := range m.Parts {
			if p.Type == chat.PartToolCall && !answered[p.ToolCall.ID] && j < len(view) {
				t.Fatalf("%s left a view providers reject: the result of call %q does not follow it", what, p.ToolCall.ID)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzSessionSequences: no script of requests a client can send leaves a
// session where PrepareContext or Compact fails with Internal. `go test`
// runs the seeds (and testdata/fuzz); `go test -fuzz FuzzSessionSequences`
// explores.
func FuzzSessionSequences(f *testing.F) {
	for _, s := range sequenceSeeds {
		f.Add(s)
	}
	models, encodings := testModels(f)
	st := openSQLite(f)
	e := engine.New(encodings, models, st)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 200 {
			return
		}
		runSequence(t, context.Background(), e, st, data)
	})
}

// TestSequencesPostgres replays the fuzz seeds on PostgreSQL.
func TestSequencesPostgres(t *testing.T) {
	models, encodings := testModels(t)
	st, err := postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := engine.New(encodings, models, st)
	for i, s := range sequenceSeeds {
		t.Run(fmt.Sprint(i), func(t *testing.T) { runSequence(t, t.Context(), e, st, s) })
	}
}
