package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

type fixedCounter struct {
	n   int64
	err error
}

func (f fixedCounter) Count(context.Context, string, string, []chat.Tool, []chat.Message) (int64, bool, error) {
	return f.n, false, f.err
}

func TestProviderCounting(t *testing.T) {
	models, encodings := testModels(t)
	msgs := []chat.Message{userMsg("How many tokens is this for Claude?")}
	for _, tc := range []struct {
		name    string
		counter fixedCounter
		model   string
		want    engine.Source
	}{
		{"anthropic model, counter answers", fixedCounter{n: 1234}, "claude-sonnet-4-5", engine.SourceProvider},
		{"anthropic model, counter down", fixedCounter{err: errors.New("HTTP 500")}, "claude-sonnet-4-5", engine.SourceEstimated},
		{"openai model is never sent", fixedCounter{n: 1234}, "gpt-4o", engine.SourceEstimated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := engine.New(encodings, models, openSQLite(t), engine.WithProviderCounter(tc.counter))
			u, err := e.InlineUsage(t.Context(), tenant, engine.InlineContext{Model: tc.model, System: "Be brief.", Messages: msgs})
			if err != nil {
				t.Fatal(err) // never fails because the provider is down
			}
			if u.Source != tc.want || (tc.want == engine.SourceProvider && (u.Used != 1234 || u.ExpectedError != 0)) {
				t.Errorf("usage: %v %d ±%v", u.Source, u.Used, u.ExpectedError)
			}
			if tc.counter.err != nil && !strings.Contains(strings.Join(u.Warnings, " "), "local estimate is used") {
				t.Errorf("no fallback warning: %v", u.Warnings)
			}
			c, err := e.CountTokens(t.Context(), engine.CountInput{Model: tc.model, Messages: msgs})
			if err != nil || (tc.want == engine.SourceProvider) != (c.Total == 1234) {
				t.Errorf("CountTokens: %+v, %v", c, err)
			}
		})
	}
}
