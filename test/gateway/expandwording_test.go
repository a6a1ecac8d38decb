package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestGatewayPlaceholdersCallNothingWithoutTheTool (issue 29): the model
// behind the gateway can call no RPC, and with the session's policy
// leaving contextd_expand off (the default) it has only its client's
// tools. Every placeholder and summary that went upstream told it "Call
// ExpandMessage with message id ...", a call it cannot make. Now an agent
// loop compacted through a small window sends placeholders that name
// their id (which ExpandMessage, an operator's call, expands) and tell it
// to call nothing; a pruned tool output says to rerun the call.
//
// The wording follows the session's gateway label, which the gateway sets
// on the sessions it makes: a session the API made and a client names with
// X-Contextd-Session has none and keeps the API's wording (the model is
// told to call ExpandMessage) unless it is labelled gateway.
func TestGatewayPlaceholdersCallNothingWithoutTheTool(t *testing.T) {
	for _, c := range []struct {
		name   string
		labels map[string]string // of a session the API makes first (nil: the gateway makes it)
		api    bool              // its placeholders keep the API's wording
	}{
		{"made by the gateway", nil, false},
		{"made by the API, labelled gateway", map[string]string{"gateway": "api"}, false},
		{"made by the API", map[string]string{"team": "a"}, true},
	} {
		t.Run(c.name, func(t *testing.T) { gatewayPlaceholders(t, c.labels, c.api) })
	}
}

func gatewayPlaceholders(t *testing.T, labels map[string]string, api bool) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "small-gpt", "provider": "openai", "context_window": 4000, "max_output_tokens": 500, "encoding": "o200k_base"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
	var header map[string]string
	if labels != nil {
		s.rpc("CreateSession", map[string]any{"id": "api-made", "model": "small-gpt", "labels": labels}, nil)
		header = map[string]string{"X-Contextd-Session": "api-made"}
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "shell", "parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}}
	history := []any{map[string]any{"role": "user", "content": "Find which config value breaks the build and fix it."}}
	session := ""
	for round := range 30 {
		// The model calls the shell; the client runs it and sends the result.
		id, args := fmt.Sprintf("call_%d", round), fmt.Sprintf(`{"command":"cat part-%d.txt"}`, round)
		s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{{ID: id, Name: "shell", Arguments: args}}})
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "small-gpt", "messages": history, "tools": tools}, header)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: %d %s", round, resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-Contextd-Session"); session == "" {
			session = got
		} else if got != "" && got != session {
			t.Fatalf("round %d: session %q, then %q", round, session, got)
		}
		history = append(history,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "shell", "arguments": args}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": strings.Repeat(fmt.Sprintf("part %d: config value alpha=%d, checked\n", round, round), 30)})
	}
	if labels != nil && session != "api-made" {
		t.Fatalf("the calls went to session %q, not the one named", session)
	}
	named := regexp.MustCompile(`[Ii]ts id is ([A-Za-z0-9_]+)([.;])`)
	if api {
		named = regexp.MustCompile(`[Cc]all ExpandMessage with message id ([A-Za-z0-9_]+) to read [a-z ]+(\.)`)
	}
	placeholders, outputs, summaries := 0, 0, 0
	ids := map[string]bool{}
	for i, r := range s.fake.Requests() {
		sent := string(r.Raw)
		if strings.Contains(sent, "contextd_expand") || !api && (strings.Contains(sent, "ExpandMessage") || strings.Contains(sent, "expand an id")) {
			t.Fatalf("request %d tells the model to call what it cannot: %.3000s", i, sent)
		}
		n := strings.Count(sent, "[contextd pruned") + strings.Count(sent, "[contextd summary") + strings.Count(sent, "[contextd dropped")
		found := named.FindAllStringSubmatch(sent, -1)
		if len(found) != n {
			t.Errorf("request %d: %d placeholders and summaries, %d name their id: %.3000s", i, n, len(found), sent)
		}
		placeholders += n
		summaries += strings.Count(sent, "[contextd summary")
		for _, f := range found {
			ids[f[1]] = true
			if f[2] == ";" {
				outputs++
			}
		}
		if api {
			outputs += strings.Count(sent, "[contextd pruned this output of shell")
			continue
		}
		if strings.Count(sent, "; rerun the call if needed.") < strings.Count(sent, "[contextd pruned this output of shell") {
			t.Errorf("request %d: a pruned tool output does not say to rerun the call: %.3000s", i, sent)
		}
	}
	if outputs == 0 || summaries == 0 {
		t.Fatalf("no compaction of each kind went upstream (%d placeholders, %d of tool outputs, %d summaries)", placeholders, outputs, summaries)
	}
	t.Logf("%d placeholders and summaries went upstream, %d of tool outputs, %d summaries, %d ids", placeholders, outputs, summaries, len(ids))
	// Each id named is one an operator expands.
	for id := range ids {
		var x struct {
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
			Originals []any `json:"originals"`
		}
		s.rpc("ExpandMessage", map[string]any{"sessionId": session, "messageId": id}, &x)
		if x.Message.ID != id {
			t.Errorf("ExpandMessage(%s): %+v", id, x)
		}
	}
	s.checkUpstream()
}
