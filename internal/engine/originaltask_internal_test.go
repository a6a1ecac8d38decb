package engine

import (
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestOriginalTaskIsWhatThePersonTyped: Codex CLI sends its
// <environment_context> as a user message before the typed task; the
// original task compaction keeps verbatim is the typed one.
func TestOriginalTaskIsWhatThePersonTyped(t *testing.T) {
	user := func(id, text string) chat.Message {
		return chat.Message{ID: id, Role: chat.RoleUser, Kind: chat.KindNormal, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
	}
	view := []chat.Message{
		user("env", "<environment_context>\n  <cwd>/tmp/x</cwd>\n</environment_context>"),
		user("task", "TASK=checks fix the tests"),
		user("later", "and then the docs"),
	}
	if got := originalTask(view); got != "task" {
		t.Errorf("original task %q, want the typed one", got)
	}
	if got := originalTask(view[:1]); got != "env" {
		t.Errorf("without a typed message: %q, want the first user message", got)
	}
}
