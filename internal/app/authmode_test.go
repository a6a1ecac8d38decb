package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestAuthFailsClosed: the server never switches authentication off by
// itself. Keys configured but unusable, or no keys on an address other
// hosts reach, refuse to start; only CONTEXTD_AUTH=off (logged at error
// level) or a loopback address without keys (the quickstart) serve without
// credentials.
func TestAuthFailsClosed(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		wantErr string // "" means it starts
		wantOn  bool
		wantLog string
	}{
		{"quickstart: no keys, default loopback address", map[string]string{}, "", false, "authentication is off"},
		{"no keys on every interface", map[string]string{"CONTEXTD_LISTEN_ADDR": ":50051"}, "CONTEXTD_AUTH=off", false, ""},
		{"no keys on a host address", map[string]string{"CONTEXTD_LISTEN_ADDR": "10.1.2.3:50051"}, "reachable from other hosts", false, ""},
		{"explicitly off", map[string]string{"CONTEXTD_LISTEN_ADDR": ":50051", "CONTEXTD_AUTH": "off"}, "", false, "authentication is OFF"},
		{"on without keys", map[string]string{"CONTEXTD_LISTEN_ADDR": "127.0.0.1:1", "CONTEXTD_AUTH": "on"}, "no API keys are configured", false, ""},
		{"empty keys file", map[string]string{"CONTEXTD_API_KEYS_FILE": keysFile(t, "")}, "holds no usable API key", false, ""},
		{"keys file of comments", map[string]string{"CONTEXTD_API_KEYS_FILE": keysFile(t, "# {\"id\":\"a\"}")}, "holds no usable API key", false, ""},
		{"only revoked keys", map[string]string{"CONTEXTD_API_KEYS_FILE": keysFile(t, keyLine("a", "acme", "k", true))}, "holds no usable API key", false, ""},
		{"missing keys file", map[string]string{"CONTEXTD_API_KEYS_FILE": "/nonexistent/keys.jsonl"}, "keys file", false, ""},
		{"keys", map[string]string{"CONTEXTD_LISTEN_ADDR": ":50051", "CONTEXTD_API_KEYS_FILE": keysFile(t, keyLine("a", "acme", "k", false))}, "", true, "authentication is on"},
		{"unknown mode", map[string]string{"CONTEXTD_AUTH": "maybe"}, "CONTEXTD_AUTH", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig(nil, mapEnv(tc.env))
			var logs bytes.Buffer
			if err == nil {
				var keys interface{ Enabled() bool }
				keys, err = LoadAuth(cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
				if err == nil && keys.Enabled() != tc.wantOn {
					t.Errorf("authentication on = %v, want %v", keys.Enabled(), tc.wantOn)
				}
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused to start: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error saying %q", err, tc.wantErr)
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log %q does not say %q", logs.String(), tc.wantLog)
			}
		})
	}
}

// TestKeysReload: a key revoked in the keys file is refused within
// seconds, without a restart, and a new key is accepted; a file that no
// longer parses grants nothing.
func TestKeysReload(t *testing.T) {
	file := keysFile(t, keyLine("a", "acme", "k-a", false))
	conn := startServer(t, map[string]string{"CONTEXTD_API_KEYS_FILE": file, "CONTEXTD_API_KEYS_RELOAD": "100ms"})
	client := contextdv1.NewContextServiceClient(conn)
	call := func(key string) error {
		_, err := client.ListModels(as(t.Context(), key), &contextdv1.ListModelsRequest{})
		return err
	}
	if err := call("k-a"); err != nil {
		t.Fatal(err)
	}
	if err := call("k-b"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unknown key: %v", err)
	}
	write := func(lines ...string) {
		t.Helper()
		rewriteKeys(t, file, lines...)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20 s", what)
			}
		}
	}
	write(keyLine("a", "acme", "k-a", true), keyLine("b", "acme", "k-b", false))
	waitFor("revoked key refused", func() bool { return status.Code(call("k-a")) == codes.Unauthenticated })
	if err := call("k-b"); err != nil {
		t.Errorf("the new key: %v", err)
	}
	// A broken file fails closed: a line that does not parse grants
	// nothing (hostile_keys_test.go has the cases).
	write("not json")
	waitFor("broken file grants nothing", func() bool { return status.Code(call("k-b")) == codes.Unauthenticated })
}
