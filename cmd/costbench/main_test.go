package main

import (
	"errors"
	"testing"

	"github.com/contextd/contextd/internal/costbench"
)

// TestJudgeFlags: -judge without an LLM summarizer configured (the
// extractive default, or a provider with neither base URL nor key) is a
// clear error naming the settings; with one, or -judge-fake, the judge is
// built; -judge-fake alone and a sample of 0 are refused.
func TestJudgeFlags(t *testing.T) {
	for _, env := range []string{"CONTEXTD_OPENAI_BASE_URL", "CONTEXTD_OPENAI_API_KEY", "CONTEXTD_OPENAI_API_KEY_FILE",
		"CONTEXTD_ANTHROPIC_BASE_URL", "CONTEXTD_ANTHROPIC_API_KEY", "CONTEXTD_ANTHROPIC_API_KEY_FILE"} {
		t.Setenv(env, "")
	}
	for _, spec := range []string{"extractive", "openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"} {
		t.Setenv("CONTEXTD_SUMMARIZER", spec)
		if _, err := newJudge(true, false, 8); !errors.Is(err, costbench.ErrNoJudgeModel) {
			t.Errorf("CONTEXTD_SUMMARIZER=%s without endpoints: err = %v, want ErrNoJudgeModel", spec, err)
		}
	}
	t.Setenv("CONTEXTD_SUMMARIZER", "openai:gpt-4o-mini")
	t.Setenv("CONTEXTD_OPENAI_BASE_URL", "http://localhost:11434/v1")
	// The judge is not printed: its endpoints hold the API key.
	if j, err := newJudge(true, false, 8); err != nil {
		t.Errorf("configured: %v", err)
	} else if j.Spec != "openai:gpt-4o-mini" {
		t.Errorf("configured: the judge asks %q", j.Spec)
	}
	if j, err := newJudge(true, true, 8); err != nil || !j.Fake {
		t.Errorf("-judge -judge-fake: %+v, %v", j, err)
	}
	if _, err := newJudge(false, true, 8); err == nil {
		t.Error("-judge-fake without -judge: no error")
	}
	if _, err := newJudge(true, true, 0); err == nil {
		t.Error("-judge-sample 0: no error")
	}
	if j, err := newJudge(false, false, 8); j != nil || err != nil {
		t.Errorf("no judge: %+v, %v", j, err)
	}
}
