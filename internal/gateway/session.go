package gateway

import (
	"context"
	"encoding/base32"
	"errors"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

func encodeID(b []byte) string {
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)[:26])
}

// unmake deletes a session this request created when the request failed
// before anything was stored in it, so a refused call leaves nothing.
func (g *Gateway) unmake(ctx context.Context, tenant string, res resolved) {
	if !res.made {
		return
	}
	ctx, cancel := detach(ctx)
	defer cancel()
	// Compare and delete in one statement: a concurrent request that
	// wrote to the session, or made it again, keeps it.
	_, _ = g.cfg.Engine.DeleteUnusedSession(ctx, tenant, res.id, res.created)
}

// create makes the session of a conversation, labelled with the door, and
// returns its creation time; made is false when it existed already (a
// concurrent twin of the request made it). CreateSession answers a create
// of an existing id with the same settings as a retried create, with the
// session as it is: one that moved since it was made (a twin appended to
// it) is not this request's to fill from version 1 — taken as made, the
// request appended at version 1 again and again, each time a conflict,
// until its budget ran out: 409 after 10 s (TestRetryStormPastTheForkBudget
// on PostgreSQL met it once under load, a twin sent to the numbered fork
// its twin had made and gone on in while that one was busy).
func (g *Gateway) create(ctx context.Context, tenant, id string, d door, c *conversation) (created time.Time, made bool, err error) {
	v, err := g.cfg.Engine.CreateSession(ctx, tenant, engine.NewSession{
		ID: id, Model: c.model, System: c.system, Tools: c.tools,
		Labels: map[string]string{SessionLabel: d.name()},
	})
	if errors.Is(err, store.ErrAlreadyExists) || err == nil && (v.Version != 1 || v.LogCount != 0) {
		return time.Time{}, false, nil
	}
	return v.CreatedAt, err == nil, err
}

// followMask names what of the session follow changes to the request's:
// its model, system prompt and tools, where they differ (none: the
// request keeps them all, as a repeat and the held row's match need).
func followMask(s store.Session, c *conversation) []string {
	var mask []string
	if s.Model != c.model {
		mask = append(mask, engine.FieldModel)
	}
	if s.SystemPrompt != c.system {
		mask = append(mask, engine.FieldSystemPrompt)
	}
	if !sameTools(s.Tools, c.tools) {
		mask = append(mask, engine.FieldTools)
	}
	return mask
}

// follow brings the session's model, system prompt and tools to the
// request's, when the client changed them (an ordinary, versioned update),
// and returns the session as updated (nil: unchanged).
func (g *Gateway) follow(ctx context.Context, tenant string, s store.Session, c *conversation) (*store.Session, error) {
	mask := followMask(s, c)
	if len(mask) == 0 {
		return nil, nil
	}
	v, err := g.cfg.Engine.UpdateSession(ctx, tenant, s.ID, engine.SessionUpdate{Mask: mask, Model: c.model, System: c.system, Tools: c.tools,
		ExpectedVersion: &s.Version})
	if err != nil {
		return nil, err
	}
	return &v.Session, nil
}

func sameTools(a, b []chat.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		// The same text needs no parsing (the common case: a client
		// resends its tools as they were); only a difference is compared
		// as canonical JSON.
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description ||
			a[i].Parameters != b[i].Parameters && string(canonicalJSON([]byte(a[i].Parameters))) != string(canonicalJSON([]byte(b[i].Parameters))) {
			return false
		}
	}
	return true
}

// resultOf is the call a tool message answers ("" for other messages).
func resultOf(m *chat.Message) string {
	if m.Role != chat.RoleTool {
		return ""
	}
	for _, p := range m.Parts {
		if p.Type == chat.PartToolResult {
			return p.ToolResult.ToolCallID
		}
	}
	return ""
}
