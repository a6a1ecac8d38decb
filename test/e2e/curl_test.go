package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// docCurl returns the commands of the first sh block after the heading in
// the document (a path from the repository root): continuation lines
// joined, comments dropped.
func docCurl(t *testing.T, doc, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), doc))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), heading)
	if !ok {
		t.Fatalf("%s has no %q", doc, heading)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatalf("%q has no sh block", heading)
	}
	var cmds []string
	var cur strings.Builder
	for line := range strings.Lines(block) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "#") {
			continue
		}
		cur.WriteString(strings.TrimSuffix(line, "\\"))
		if strings.HasSuffix(line, "\\") || strings.HasSuffix(line, "|") {
			continue
		}
		cmds = append(cmds, cur.String())
		cur.Reset()
	}
	return cmds
}

// TestDocsCurl runs the documentation's curl lines (docs/clients.md, then
// docs/api.md's HTTP/JSON section), as written, against the binary: every unary line answers JSON that is not an error, and the
// Connect stream delivers the snapshot, then an append made through gRPC.
func TestDocsCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (.ci/run installs it): ", err)
	}
	srv := startProc(t, build(t, t.TempDir(), "contextd", "./cmd/server"), "CONTEXTD_DATA_DIR="+t.TempDir())
	cmds := append(docCurl(t, "docs/clients.md", "## curl (any HTTP client)"), docCurl(t, "docs/api.md", "## HTTP/JSON (Connect)")...)
	if len(cmds) < 8 {
		t.Fatalf("the docs blocks have %d commands", len(cmds))
	}
	bash := func(ctx context.Context, cmd string) *exec.Cmd {
		c := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", strings.ReplaceAll(cmd, "localhost:50051", srv.addr))
		c.Env = append(os.Environ(), "KEY=k-readme", "CONTEXTD_API_KEY=k-readme") // auth is off: any key goes
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}                       // curl dies with its shell
		c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
		c.WaitDelay = 5 * time.Second
		return c
	}
	for _, cmd := range cmds {
		if strings.Contains(cmd, "WatchContextStatus") {
			continue
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		out, err := bash(ctx, cmd).Output() // stderr has curl's progress meter
		cancel()
		var answer map[string]any
		if err != nil || json.Unmarshal(out, &answer) != nil || answer["code"] != nil {
			t.Errorf("%s\n→ %v: %s", cmd, err, out)
		}
		if strings.Contains(cmd, "CountTokens") && answer["totalTokens"] != "1" {
			t.Errorf("%s\n→ %s", cmd, out)
		}
	}

	var watchCmd string
	for _, cmd := range cmds {
		if strings.Contains(cmd, "WatchContextStatus") {
			watchCmd = cmd
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	watch := bash(ctx, watchCmd)
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = watch.Wait() }()
	// Envelopes are binary; each message's JSON ends with "}}" and the next
	// envelope's flag byte follows, so scan for the events by name.
	r := bufio.NewReader(stdout)
	readUntil := func(event string) {
		t.Helper()
		var seen strings.Builder
		for !strings.Contains(seen.String(), event) {
			b, err := r.ReadByte()
			if err != nil {
				t.Fatalf("stream ended before %s: %v\n%s", event, err, seen.String())
			}
			seen.WriteByte(b)
		}
	}
	readUntil("STATUS_EVENT_SNAPSHOT")
	client := contextdv1.NewContextServiceClient(srv.conn)
	if _, err := client.AppendMessages(t.Context(), &contextdv1.AppendMessagesRequest{SessionId: "agent-1", Messages: []*contextdv1.Message{
		{Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: "Fixed."}}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	readUntil("STATUS_EVENT_APPENDED")
}
