package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
)

// serveModels answers GET /v1/models from the registry, in Anthropic's
// shape when the client is Anthropic's (it sends anthropic-version), else
// in OpenAI's. Each model also says its context window and output limit.
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request) {
	shape := shapeOf(r)
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, shape, http.StatusMethodNotAllowed, errInvalid, "/v1/models takes GET")
		return
	}
	if _, ok := g.admit(w, r, shape); !ok {
		return
	}
	models := g.cfg.Models.Models()
	var body any
	if shape == shapeAnthropic {
		data := make([]map[string]any, 0, len(models))
		for _, m := range models {
			data = append(data, map[string]any{"type": "model", "id": m.Name, "display_name": m.Name,
				"created_at": "1970-01-01T00:00:00Z", "context_window": m.ContextWindow, "max_output_tokens": m.MaxOutputTokens})
		}
		resp := map[string]any{"data": data, "has_more": false, "first_id": nil, "last_id": nil}
		if len(models) > 0 {
			resp["first_id"], resp["last_id"] = models[0].Name, models[len(models)-1].Name
		}
		body = resp
	} else {
		data := make([]map[string]any, 0, len(models))
		for _, m := range models {
			data = append(data, map[string]any{"id": m.Name, "object": "model", "created": 0, "owned_by": "contextd",
				"context_window": m.ContextWindow, "max_output_tokens": m.MaxOutputTokens})
		}
		body = map[string]any{"object": "list", "data": data}
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// serveCount answers Anthropic's POST /v1/messages/count_tokens with
// contextd's count of what the gateway would send for the request now: the
// session's active view plus what the request adds to it (when the request
// extends a session), else the request as it is. A compaction the next
// call may run is not foreseen. Nothing is stored.
func (g *Gateway) serveCount(w http.ResponseWriter, r *http.Request) {
	shape := shapeAnthropic
	tenant, ok := g.admit(w, r, shape)
	if !ok {
		return
	}
	body, ok := g.readBody(w, r, shape)
	if !ok {
		return
	}
	fields := body.fields
	ctx := r.Context()
	c, err := g.msgs.parse(body)
	if err != nil {
		g.writeDomainError(ctx, w, shape, err)
		return
	}
	msgs, err := g.wouldSend(r, tenant, c, fields)
	if err != nil {
		g.writeDomainError(ctx, w, shape, err)
		return
	}
	res, err := g.cfg.Engine.CountTokens(ctx, engine.CountInput{Model: c.model, System: c.system, Tools: c.tools, Messages: msgs})
	if err != nil {
		g.writeDomainError(ctx, w, shape, err)
		return
	}
	if !res.Exact {
		w.Header().Set(HeaderWarning, "approximate: contextd counts "+c.model+" with "+res.Encoding)
	}
	b, _ := json.Marshal(map[string]int64{"input_tokens": res.Total})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// wouldSend is the view a request would be sent with, were it served now
// and without compacting: its session's active view (with the client's
// versions of the messages it resends) and what is new, or
// the request's own messages when it extends no session.
func (g *Gateway) wouldSend(r *http.Request, tenant string, c *conversation, fields map[string]json.RawMessage) ([]chat.Message, error) {
	ctx := r.Context()
	sig, err := signalOf(tenant, doorAnthropic, r, fields)
	if err != nil {
		return nil, chat.Invalid(HeaderSession, "%v", err)
	}
	historyChains(doorAnthropic, sig, c)
	id, k, err := g.landing(ctx, tenant, c, sig)
	if err != nil || id == "" {
		return c.msgs, err
	}
	var view []chat.Message
	page := engine.Page{Size: 1000}
	for {
		p, err := g.cfg.Engine.GetMessages(ctx, tenant, id, engine.ViewActive, page)
		if err != nil {
			return nil, err
		}
		view = append(view, p.Messages...)
		if p.Next == "" {
			break
		}
		page.Token = p.Next
	}
	// The client's versions of the stored messages it resends (a result it
	// cleared, cleared): what would go upstream (asSent), recorded as its
	// edits when served (clientedit.go).
	return append(asSent(view, c), c.msgs[k:]...), nil
}
