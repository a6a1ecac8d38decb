package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/tokens"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func testModels(t testing.TB) (*tokens.Registry, *tokens.Encodings) {
	t.Helper()
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	return models, tokens.NewEncodings()
}

func openSQLite(t testing.TB) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// backends runs fn once per store backend.
func backends(t *testing.T, fn func(t *testing.T, e *engine.Engine)) { backendsWith(t, nil, fn) }

// backendsWith runs fn once per store backend, with an engine built with opts.
func backendsWith(t *testing.T, opts []engine.Option, fn func(t *testing.T, e *engine.Engine)) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, s store.Store) { fn(t, engine.New(encodings, models, s, opts...)) })
}

// backendStores runs fn once per store backend, with a fresh store.
func backendStores(t *testing.T, fn func(t *testing.T, s store.Store)) {
	open := map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			s, err := sqlite.Open(t.Context(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"postgres": func(t *testing.T) store.Store {
			s, err := postgres.Open(t.Context(), pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			s := open[name](t)
			t.Cleanup(func() { s.Close() })
			fn(t, s)
		})
	}
}

const tenant = store.DefaultTenant

func userMsg(text string) chat.Message {
	return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
}

func callMsg(ids ...string) chat.Message {
	m := chat.Message{Role: chat.RoleAssistant}
	for _, id := range ids {
		m.Parts = append(m.Parts, chat.Part{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: id, Name: "read", Arguments: `{"path":"x"}`}})
	}
	return m
}

func resultMsg(id, content string) chat.Message {
	return chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: id, Content: content}}}}
}

func newSession(t *testing.T, e *engine.Engine) engine.SessionView {
	t.Helper()
	v, err := e.CreateSession(t.Context(), tenant, engine.NewSession{Model: "gpt-4o", System: "You are a coding agent.",
		Tools: []chat.Tool{{Name: "read", Description: "Read a file.", Parameters: `{"type":"object","properties":{"path":{"type":"string"}}}`}}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAppendAndUsage(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := newSession(t, e)
		msgs := []chat.Message{userMsg("Fix the bug."), callMsg("c1", "c2"), resultMsg("c1", "package main"), resultMsg("c2", "func main() {}")}
		res, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		if res.Version != 2 || len(res.Messages) != 4 || res.Messages[3].Position != 4 || res.Messages[0].Tokens == 0 {
			t.Fatalf("append: %+v", res)
		}
		// Stored usage equals counting the same request inline.
		inline, err := e.InlineUsage(ctx, tenant, engine.InlineContext{Model: "gpt-4o", System: v.SystemPrompt, Tools: v.Tools, Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		stored, err := e.SessionUsage(ctx, tenant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Used != inline.Used || stored.MessagesTokens != inline.MessagesTokens || stored.MessageCount != 4 {
			t.Errorf("stored usage %+v != inline %+v", stored, inline)
		}
		page, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 3})
		if err != nil || len(page.Messages) != 3 || page.Next == "" {
			t.Fatalf("first page: %+v, %v", page, err)
		}
		rest, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 3, Token: page.Next})
		if err != nil || len(rest.Messages) != 1 || rest.Next != "" || rest.Messages[0].Parts[0].ToolResult.Content != "func main() {}" {
			t.Fatalf("second page: %+v, %v", rest, err)
		}
		if _, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{Token: page.Next}); err == nil {
			t.Error("an active-view token must not be accepted for the log")
		}
	})
}

func TestBadInputChangesNothing(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := newSession(t, e)
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("hi"), callMsg("c1")}}); err != nil {
			t.Fatal(err)
		}
		var invalid *chat.InvalidError
		for _, tc := range []struct {
			name  string
			id    string
			msgs  []chat.Message
			check func(error) bool
			field string
		}{
			{"unknown session", "nope", []chat.Message{userMsg("x")}, func(err error) bool { return errors.Is(err, store.ErrNotFound) }, ""},
			{"empty batch", v.ID, nil, func(err error) bool { return errors.As(err, &invalid) }, "messages"},
			{"dangling tool result", v.ID, []chat.Message{userMsg("ok"), resultMsg("zzz", "out")},
				func(err error) bool { return errors.As(err, &invalid) }, "messages[1].parts[0].tool_result.tool_call_id"},
			{"second result for one call", v.ID, []chat.Message{resultMsg("c1", "a"), resultMsg("c1", "b")},
				func(err error) bool { return errors.As(err, &invalid) }, "messages[1].parts[0].tool_result.tool_call_id"},
			{"reused call id", v.ID, []chat.Message{callMsg("c1")},
				func(err error) bool { return errors.As(err, &invalid) }, "messages[0].parts[0].tool_call.id"},
			{"invalid role", v.ID, []chat.Message{{Role: "robot", Parts: []chat.Part{{Type: chat.PartText, Text: "x"}}}},
				func(err error) bool { return errors.As(err, &invalid) }, "messages[0].role"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				invalid = nil
				_, err := e.AppendMessages(ctx, tenant, tc.id, engine.AppendInput{Messages: tc.msgs})
				if !tc.check(err) {
					t.Fatalf("got %v", err)
				}
				if tc.field != "" && invalid.Violations[0].Field != tc.field {
					t.Errorf("field %q, want %q (%v)", invalid.Violations[0].Field, tc.field, err)
				}
			})
		}
		after, err := e.GetSession(ctx, tenant, v.ID)
		if err != nil || after.Version != 2 || after.LogCount != 2 {
			t.Errorf("bad input changed the session: %+v, %v", after.Session, err)
		}
	})
}

func TestIdempotentRetry(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := newSession(t, e)
		in := engine.AppendInput{Messages: []chat.Message{userMsg("once")}, IdempotencyKey: "k1"}
		first, err := e.AppendMessages(ctx, tenant, v.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		again, err := e.AppendMessages(ctx, tenant, v.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		if again.Version != first.Version || again.Messages[0].ID != first.Messages[0].ID || !again.Messages[0].CreatedAt.Equal(first.Messages[0].CreatedAt) {
			t.Errorf("retry answered %+v, first %+v", again, first)
		}
		other := engine.AppendInput{Messages: []chat.Message{userMsg("different")}, IdempotencyKey: "k1"}
		if _, err := e.AppendMessages(ctx, tenant, v.ID, other); !errors.Is(err, engine.ErrFailedPrecondition) {
			t.Errorf("reused key: %v", err)
		}
		log, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{})
		if err != nil || len(log.Messages) != 1 {
			t.Errorf("log holds %d messages, want 1 (%v)", len(log.Messages), err)
		}
	})
}

// TestConcurrentAppends: 16 writers with expected-version retries leave a
// gap-free, duplicate-free log.
func TestConcurrentAppends(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		v := newSession(t, e)
		const writers, each = 16, 5
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					for {
						cur, err := e.GetSession(ctx, tenant, v.ID)
						if err != nil {
							errs <- err
							return
						}
						ver := cur.Version
						_, err = e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{
							Messages: []chat.Message{userMsg(fmt.Sprintf("w%d-%d", w, i))}, ExpectedVersion: &ver})
						if errors.Is(err, store.ErrVersionConflict) {
							continue
						}
						if err != nil {
							errs <- err
							return
						}
						break
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		log, err := e.GetMessages(context.Background(), tenant, v.ID, engine.ViewLog, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for i, m := range log.Messages {
			if m.Position != int64(i+1) {
				t.Fatalf("gap: message %d has position %d", i, m.Position)
			}
			if seen[m.Text()] {
				t.Fatalf("duplicate %q", m.Text())
			}
			seen[m.Text()] = true
		}
		if len(log.Messages) != writers*each || log.Version != int64(1+writers*each) {
			t.Errorf("%d messages at version %d", len(log.Messages), log.Version)
		}
	})
}

func TestSessionsListAndDelete(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		for i := range 5 {
			_, err := e.CreateSession(ctx, tenant, engine.NewSession{ID: fmt.Sprintf("s%d", i), Model: "claude-sonnet-4-5",
				Labels: map[string]string{"parity": fmt.Sprint(i % 2)}})
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.CreateSession(ctx, tenant, engine.NewSession{ID: "s1", Model: "gpt-4o"}); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("duplicate id: %v", err)
		}
		var ids []string
		page := engine.Page{Size: 2}
		for {
			views, next, err := e.ListSessions(ctx, tenant, map[string]string{"parity": "0"}, page)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range views {
				ids = append(ids, v.ID)
			}
			if next == "" {
				break
			}
			page.Token = next
		}
		if len(ids) != 3 {
			t.Errorf("parity 0 sessions: %v", ids)
		}
		if err := e.DeleteSession(ctx, tenant, "s2"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.GetSession(ctx, tenant, "s2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted session: %v", err)
		}
		if _, err := e.GetSession(ctx, "another-tenant", "s1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("another tenant sees s1: %v", err)
		}
	})
}
