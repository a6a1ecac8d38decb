package engine_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
)

// afterCompactMessage is the user message Claude Code sends after /compact
// (issue 29/31): the files it read again as <system-reminder> text parts
// (about 18 KB of each part of text), then the short typed prompt.
func afterCompactMessage(typed string) chat.Message {
	m := chat.Message{Role: chat.RoleUser}
	for _, name := range []string{"part-2", "part-4", "part-1"} {
		var b strings.Builder
		b.WriteString("<system-reminder>\nResult of calling the Read tool:\n")
		for i := 0; i < 300; i++ {
			b.WriteString("     " + name + " line: value amber falcon " + strings.Repeat("z", i%23) + "\n")
		}
		b.WriteString("</system-reminder>")
		m.Parts = append(m.Parts, chat.Part{Type: chat.PartText, Text: b.String()})
	}
	m.Parts = append(m.Parts, chat.Part{Type: chat.PartText, Text: typed})
	return m
}

// A latest user message made mostly of a client's scaffolding, too large
// for the window (gpt-4: 8,192 tokens) on its own: PrepareContext answers
// with its scaffolding parts pruned instead of refusing, the typed prompt
// verbatim; the stand-in expands to the message as appended, and revert
// restores the view byte-identical to what was appended.
func TestPrepareFitsAMessageOfScaffolding(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: "You are a coding agent."})
		if err != nil {
			t.Fatal(err)
		}
		typed := "TASK=recheck-amber Now recheck the notes with the words amber falcon."
		msgs := []chat.Message{userMsg("Check the notes."), {Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "DONE."}}},
			afterCompactMessage(typed)}
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: msgs})
		if err != nil {
			t.Fatal(err) // without the fix: FAILED_PRECONDITION, request cannot fit the context window
		}
		st := res.Status
		if !st.Compacted || st.LastCompaction == nil || st.Usage.Used > st.Usage.ContextWindow-st.Usage.ReservedOutput {
			t.Fatalf("status: compacted %v, used %d of %d", st.Compacted, st.Usage.Used, st.Usage.ContextWindow)
		}
		last := res.Messages[len(res.Messages)-1]
		if last.Parts[len(last.Parts)-1].Text != typed || len(last.Parts) != 4 {
			t.Fatalf("typed prompt not verbatim: %+v", last.Parts[len(last.Parts)-1])
		}
		log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{Size: 100})
		if err != nil || len(log.Messages) != 3 {
			t.Fatalf("log: %d, %v", len(log.Messages), err)
		}
		latest := log.Messages[2]
		if last.Metadata[compaction.ScaffoldOfKey] != latest.ID || !strings.Contains(last.Parts[0].Text, latest.ID) {
			t.Fatalf("the stand-in does not name %s: %+v", latest.ID, last)
		}
		x, err := e.ExpandMessage(ctx, tenant, v.ID, last.ID, "")
		if err != nil || len(x.Originals) != 1 || !reflect.DeepEqual(x.Originals[0].Parts, msgs[2].Parts) {
			t.Fatalf("expand %s: %v", last.ID, err)
		}
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, st.LastCompaction.ID); err != nil {
			t.Fatal(err)
		}
		view, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 100})
		if err != nil || !reflect.DeepEqual(view.Messages, log.Messages) {
			t.Fatalf("revert: the view is not the log (%v)", err)
		}
		for i := range msgs {
			if !reflect.DeepEqual(view.Messages[i].Parts, msgs[i].Parts) {
				t.Fatalf("revert: message %d differs from what was appended", i)
			}
		}
		// A prompt the person typed that is too large still is refused.
		big := userMsg(strings.Repeat("my own words ", 4000))
		if _, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{big}}); !errors.Is(err, engine.ErrFailedPrecondition) {
			t.Fatalf("typed past the window: %v", err)
		}
	})
}

// The original task whose scaffolding gave way stays the original task in
// later rounds: its stand-in is kept whatever keep_human_tokens says (here
// 0), as the task was before, and its typed prompt with it.
func TestStandInOfTheOriginalTaskStaysTheTask(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		none := int64(0)
		v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4", System: "You are a coding agent.",
			Policy: compaction.Overrides{KeepHumanTokens: &none}})
		if err != nil {
			t.Fatal(err)
		}
		typed := "TASK=recheck-amber Now recheck the notes with the words amber falcon."
		res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: []chat.Message{afterCompactMessage(typed)}})
		if err != nil {
			t.Fatal(err)
		}
		standIn := res.Messages[0]
		if standIn.Metadata[compaction.ScaffoldOfKey] == "" {
			t.Fatalf("fixture: the task has no stand-in: %+v", standIn.Metadata)
		}
		var more []chat.Message
		for i := 0; i < 8; i++ {
			more = append(more, chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText,
				Text: strings.Repeat("I looked at the notes again and found more. ", 60)}}}, userMsg("Go on."))
		}
		res, err = e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: more})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Status.Compacted {
			t.Fatal("fixture: the second round did not compact")
		}
		for _, m := range res.Messages {
			if m.ID == standIn.ID {
				if !reflect.DeepEqual(m.Parts, standIn.Parts) {
					t.Fatal("the task's stand-in changed")
				}
				return
			}
		}
		t.Fatalf("the original task's stand-in %s (typed %q) was compacted away", standIn.ID, typed)
	})
}
