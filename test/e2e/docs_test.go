package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runnableBlock is one fenced sh block under a "Try it" heading.
type runnableBlock struct {
	doc, heading string
	commands     []string
}

// tryItBlocks returns the sh blocks of every section of doc whose heading
// starts with "Try it" (up to the next heading of the same or a higher
// level), each as its commands: continuation lines joined, comments and
// blank lines dropped.
func tryItBlocks(doc, text string) []runnableBlock {
	var blocks []runnableBlock
	var heading string
	level := 0 // the level of the "Try it" heading we are under, 0 when none
	inFence, sh := false, false
	var cur *runnableBlock
	var cmd strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			if !inFence {
				inFence, sh = true, line == "```sh" && level > 0
				if sh {
					blocks = append(blocks, runnableBlock{doc: doc, heading: heading})
					cur = &blocks[len(blocks)-1]
				}
			} else {
				inFence, sh = false, false
			}
			continue
		}
		if inFence {
			if !sh {
				continue
			}
			if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			cmd.WriteString(strings.TrimSuffix(line, "\\"))
			if strings.HasSuffix(line, "\\") || strings.HasSuffix(line, "|") {
				continue
			}
			cur.commands = append(cur.commands, cmd.String())
			cmd.Reset()
			continue
		}
		if m := regexp.MustCompile(`^(#+) (.*)$`).FindStringSubmatch(line); m != nil {
			switch {
			case strings.HasPrefix(strings.ToLower(m[2]), "try it"):
				level, heading = len(m[1]), m[2]
			case len(m[1]) <= level:
				level = 0
			}
		}
	}
	return blocks
}

// contextctlWord is contextctl as a command word: at the start of a command
// or after a pipe, run by name or with go run.
var contextctlWord = regexp.MustCompile(`(^|[|;&]\s*)(go run \./cmd/contextctl|contextctl)\b`)

// TestDocsTryIt runs every command of every "Try it" section of README.md and
// docs/*.md, in order, against a live server started for the test: each must
// exit 0, and a curl command must answer JSON that is not an error. This keeps
// the commands a newcomer copies first working.
func TestDocsTryIt(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (.ci/run installs it): ", err)
	}
	root := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	var blocks []runnableBlock
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		blocks = append(blocks, tryItBlocks(rel, string(b))...)
	}
	perDoc := map[string]int{}
	for _, b := range blocks {
		perDoc[b.doc] += len(b.commands)
	}
	for _, doc := range []string{"README.md", "docs/api.md", "docs/contextctl.md"} {
		if perDoc[doc] < 3 {
			t.Errorf("%s has %d runnable commands under a Try it heading, want at least 3", doc, perDoc[doc])
		}
	}

	dir := t.TempDir()
	srv := startProc(t, build(t, dir, "contextd", "./cmd/server"), "CONTEXTD_DATA_DIR="+filepath.Join(dir, "data"))
	ctl := build(t, dir, "contextctl", "./cmd/contextctl")
	for _, b := range blocks {
		for _, cmd := range b.commands {
			line := contextctlWord.ReplaceAllString(strings.ReplaceAll(cmd, "localhost:50051", srv.addr), "${1}"+ctl)
			// Generous: the first "go tool grpcurl" of a fresh machine
			// downloads and builds grpcurl (over 2 minutes on 2 cores).
			ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
			c := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
			c.Dir = root // go tool grpcurl needs the module
			c.Env = append(os.Environ(), "CONTEXTD_ADDR="+srv.addr, "NO_COLOR=1")
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
			c.WaitDelay = 5 * time.Second
			out, err := c.Output()
			cancel()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Errorf("%s, %q: %s\n→ %v\n%s%s", b.doc, b.heading, cmd, err, out, stderr)
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(cmd), "curl") {
				var answer map[string]any
				if json.Unmarshal(out, &answer) != nil || answer["code"] != nil {
					t.Errorf("%s, %q: %s\n→ %s", b.doc, b.heading, cmd, out)
				}
			}
		}
	}
}

// TestTryItBlocks: only sh blocks under a Try it heading are runnable, and
// the section ends at the next heading of the same or a higher level.
func TestTryItBlocks(t *testing.T) {
	doc := "# T\n\n```sh\nno\n```\n\n## Try it\n\n```sh\n# a comment\none \\\n  two\nthree |\n  four\n```\n\n```json\n{}\n```\n\n" +
		"### Deeper\n\n```sh\nfive\n```\n\n## Next\n\n```sh\nno\n```\n"
	got := tryItBlocks("x.md", doc)
	if len(got) != 2 || strings.Join(got[0].commands, ";") != "one   two;three |  four" || strings.Join(got[1].commands, ";") != "five" {
		t.Errorf("%+v", got)
	}
}

// TestREADMEIsALandingPage: README.md stays a landing page — at most 250
// lines, a picture of the dashboard, the two commands (.ci/run runs the
// second), and a link to every page of docs/.
func TestREADMEIsALandingPage(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := strings.Count(readme, "\n"); n > 250 {
		t.Errorf("README.md has %d lines; reference belongs in docs/", n)
	}
	for _, want := range []string{"](docs/dashboard-", "\ngo run ./cmd/server ", "\ngo test ./... "} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		if link := "](docs/" + filepath.Base(page) + ")"; !strings.Contains(readme, link) {
			t.Errorf("README.md does not link docs/%s", filepath.Base(page))
		}
	}
}
