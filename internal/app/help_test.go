package app

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpReadsAsAPersonWould: --help lists the subcommands, and every
// setting with the kind of value it takes and its default as written
// (byte sizes also in binary units), never as the flag package's
// "string" for all of them.
func TestHelpReadsAsAPersonWould(t *testing.T) {
	var out strings.Builder
	WriteHelp(&out, mapEnv(map[string]string{"CONTEXTD_LOG_LEVEL": "debug"}))
	help := out.String()
	for _, want := range []string{
		"contextd migrate", "contextd tokenizer import", "contextd --version",
		"--listen-addr HOST:PORT\n", "default: localhost:50051",
		"--shutdown-timeout DURATION\n", "default: 10s",
		"--max-message-bytes BYTES\n", "default: 16777216 (16 MiB)",
		"--ui BOOL\n", "--rate-limit-rps NUMBER\n", "--rate-limit-burst INT\n",
		"--cors-allowed-origins LIST\n", "--database-url URL\n", "--api-keys-file FILE\n",
		"--auth auto|on|off\n", "--log-level LEVEL\n", `set now: "debug"`,
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, s := range settings {
		if !strings.Contains(help, "--"+flagName(s.env)+" ") || !strings.Contains(help, s.env) {
			t.Errorf("--help lacks %s", s.env)
		}
		if settingKind(s) == "STRING" && s.def != "" && !s.secret && s.env != "CONTEXTD_SUMMARIZER" {
			t.Errorf("%s (default %q) has no kind", s.env, s.def)
		}
	}
	for line := range strings.Lines(help) {
		if len([]rune(strings.TrimRight(line, "\n"))) > 110 {
			t.Errorf("line longer than 110 columns: %q", line)
		}
	}
}

func TestVersionNamesTheBuild(t *testing.T) {
	if v := Version(); !strings.HasPrefix(v, "contextd ") || !strings.Contains(v, "go1.") {
		t.Errorf("Version() = %q", v)
	}
}

// TestRootRedirectsToDashboard: a browser pointed at the server's address
// lands on /ui/, while RPC paths are untouched; without the dashboard, / is
// not redirected. The startup log says where the API and the dashboard are.
func TestRootRedirectsToDashboard(t *testing.T) {
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, ui := range []string{"true", "false"} {
		var logs bytes.Buffer
		conn := startServerLog(t, map[string]string{"CONTEXTD_UI": ui}, &logs)
		resp, err := noFollow.Get("http://" + conn.Target() + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Location"); (ui == "true") != (resp.StatusCode == http.StatusFound && got == "/ui/") {
			t.Errorf("CONTEXTD_UI=%s: GET / = %d, Location %q", ui, resp.StatusCode, got)
		}
		var serving map[string]any
		for line := range strings.Lines(logs.String()) {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "serving" {
				serving = rec
			}
		}
		_, port, _ := net.SplitHostPort(conn.Target())
		base := "http://127.0.0.1:" + port
		if serving["api"] != base || (ui == "true") != (serving["dashboard"] == base+"/ui/") || serving["version"] == nil {
			t.Errorf("CONTEXTD_UI=%s: startup log %v", ui, serving)
		}
	}
}

// TestEverySettingIsDocumented: each setting has a row in the configuration
// table of docs/operations.md ("`CONTEXTD_X` / `_Y`" names CONTEXTD_X and
// a sibling ending in _Y).
func TestEverySettingIsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		if !strings.HasPrefix(line, "| `CONTEXTD_") {
			continue
		}
		names, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		var first string
		for _, n := range strings.Split(names, " / ") {
			n = strings.Trim(n, "`")
			switch {
			case first == "":
				first = n
				documented[n] = true
			case strings.HasPrefix(n, "_"):
				documented[first+n] = true                                 // CONTEXTD_OPENAI_API_KEY / `_FILE`
				documented[first[:strings.LastIndex(first, "_")]+n] = true // CONTEXTD_RATE_LIMIT_RPS / `_BURST`
			default:
				documented[n] = true
			}
		}
	}
	for _, s := range settings {
		if !documented[s.env] {
			t.Errorf("%s has no row in docs/operations.md's configuration table", s.env)
		}
	}
}
