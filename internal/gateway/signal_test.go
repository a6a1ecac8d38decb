package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSignalOf(t *testing.T) {
	cc := "0f1e2d3c-0000-4000-8000-000000000001"
	tests := []struct {
		name    string
		headers map[string]string
		body    string
		wantID  string // "derived" when a gw- id is expected
		scope   string
	}{
		{"nothing", nil, `{}`, "", ""},
		{"contextd header first", map[string]string{HeaderSession: "mine", "X-Claude-Code-Session-Id": cc}, `{}`, "mine", "session:mine"},
		{"claude code header", map[string]string{"X-Claude-Code-Session-Id": cc}, `{}`, "derived", "cc:" + cc},
		{"claude code 2.1 metadata", nil, `{"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"` + cc + `\"}"}}`, "derived", "cc:" + cc},
		{"claude code legacy metadata", nil, `{"metadata":{"user_id":"user_abc_account_123_session_` + cc + `"}}`, "derived", "cc:" + cc},
		{"codex header", map[string]string{"Session_id": "thread-1"}, `{"prompt_cache_key":"thread-1"}`, "derived", "cx:thread-1"},
		{"prompt cache key is a hint", nil, `{"prompt_cache_key":"k","user":"u"}`, "", "prompt_cache_key:k"},
		{"user is a hint", nil, `{"user":"u"}`, "", "user:u"},
		{"anthropic user id is a hint", nil, `{"metadata":{"user_id":"someone"}}`, "", "user_id:someone"},
		{"too long is no signal", map[string]string{"X-Claude-Code-Session-Id": strings.Repeat("x", maxSignalBytes+1)}, `{}`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/messages", nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.body), &fields); err != nil {
				t.Fatal(err)
			}
			sig, err := signalOf("t1", doorAnthropic, r, fields)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantID == "derived" {
				if !strings.HasPrefix(sig.id, "gw-") {
					t.Errorf("id %q, want a derived one", sig.id)
				}
			} else if sig.id != tc.wantID {
				t.Errorf("id %q, want %q", sig.id, tc.wantID)
			}
			if sig.scope != tc.scope {
				t.Errorf("scope %q, want %q", sig.scope, tc.scope)
			}
		})
	}
	// One signal names other sessions in other tenants and doors.
	r := httptest.NewRequest("POST", "/v1/messages", nil)
	r.Header.Set("X-Claude-Code-Session-Id", cc)
	a, _ := signalOf("t1", doorAnthropic, r, nil)
	b, _ := signalOf("t2", doorAnthropic, r, nil)
	c, _ := signalOf("t1", doorOpenAIChat, r, nil)
	if a.id == b.id || a.id == c.id {
		t.Errorf("ids %q %q %q: a signal's session must depend on the tenant and the door", a.id, b.id, c.id)
	}
	r.Header.Set(HeaderSession, "bad id!")
	if _, err := signalOf("t1", doorAnthropic, r, nil); err == nil {
		t.Error("a malformed X-Contextd-Session was accepted")
	}
}
