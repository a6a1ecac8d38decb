package contextctl

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errw strings.Builder
	code = Main(args, &out, &errw)
	return code, out.String(), errw.String()
}

// TestHelpStatesCommandsFlagsAndExitCodes: --help (or help) lists every
// command, every flag with the commands it applies to, and the exit codes.
func TestHelpStatesCommandsFlagsAndExitCodes(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"usage", "--help"}} {
		code, out, _ := runMain(args...)
		if code != exitOK {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, c := range commands {
			if !strings.Contains(out, "\n  "+c.name) {
				t.Errorf("%v lacks the command %s", args, c.name)
			}
		}
		for _, want := range []string{"--dry-run", "[compact]", "--json", "[all]", "Exit codes:", "  3  the server could not be reached"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v lacks %q", args, want)
			}
		}
	}
}

// TestFlagsInAnyPosition: connection flags may follow the command (they were
// refused there), a flag that does not apply to the command is bad usage,
// and an unreachable server is exit code 3.
func TestFlagsInAnyPosition(t *testing.T) {
	for _, args := range [][]string{
		{"usage", "s", "--addr", "127.0.0.1:1"},
		{"--addr", "127.0.0.1:1", "usage", "s"},
		{"usage", "--addr=127.0.0.1:1", "s", "--json"},
	} {
		if code, _, errw := runMain(args...); code != exitUnreachable || !strings.Contains(errw, "Unavailable") {
			t.Errorf("%v: exit %d, want %d (unreachable)\n%s", args, code, exitUnreachable, errw)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"usage", "s", "--dry-run"}, "--dry-run does not apply to usage"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"usage", "s", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"completion", "fish"}, "completion takes bash or zsh"},
	} {
		if code, _, errw := runMain(tc.args...); code != exitUsage || !strings.Contains(errw, tc.want) {
			t.Errorf("%v: exit %d, want %d and %q\n%s", tc.args, code, exitUsage, tc.want, errw)
		}
	}
	if code, _, _ := runMain(); code != exitUsage {
		t.Errorf("no command: exit %d", code)
	}
}

// TestParseAnywhere: positionals keep their order around flags, and
// everything after "--" is positional (a message text may start with -).
func TestParseAnywhere(t *testing.T) {
	code, _, errw := runMain("append", "s", "--role", "assistant", "--addr", "127.0.0.1:1", "--", "--not-a-flag", "-")
	if code != exitUnreachable {
		t.Errorf("exit %d: %s", code, errw)
	}
}

// TestMessagesJSON: append and prepare read one message, an array, or an
// AppendMessagesRequest-shaped object; anything else is a usage error.
func TestMessagesJSON(t *testing.T) {
	for in, want := range map[string]int{
		`{"role":"ROLE_USER","parts":[{"text":{"text":"hi"}}]}`:                                                            1,
		`[{"role":"ROLE_USER","parts":[{"text":{"text":"a"}}]},{"role":"ROLE_ASSISTANT","parts":[{"text":{"text":"b"}}]}]`: 2,
		`{"messages":[{"role":"ROLE_USER","parts":[{"text":{"text":"a"}}]}],"sessionId":"ignored"}`:                        1,
		` {"role": "ROLE_TOOL", "parts": [{"toolResult": {"toolCallId": "c1", "content": "ok"}}]} `:                        1,
	} {
		msgs, err := parseMessagesJSON([]byte(in))
		if err != nil || len(msgs) != want {
			t.Errorf("%s: %d messages, %v", in, len(msgs), err)
		}
	}
	for _, in := range []string{"", "hello", `{"role":"ROLE_USER","bogus":1}`, `[1]`} {
		if _, err := parseMessagesJSON([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		} else if _, ok := err.(usageError); !ok {
			t.Errorf("%q: %T, want a usage error", in, err)
		}
	}
}

// TestBashCompletion runs the generated script in bash: commands, a
// command's flags, values of --tier, and the word after a value flag
// skipped when finding the command.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	code, script, _ := runMain("completion", "bash")
	if code != exitOK {
		t.Fatal("completion bash failed")
	}
	file := filepath.Join(t.TempDir(), "contextctl.bash")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	for words, want := range map[string]string{
		"contextctl comp":                    "compact compactions completion",
		"contextctl compact s --dr":          "--dry-run",
		"contextctl --addr x us":             "usage",
		"contextctl compact s --tier su":     "summarize",
		"contextctl prepare s --role a":      "assistant",
		"contextctl completion ":             "bash zsh",
		"contextctl --addr x report s --inp": "--input",
	} {
		line := "source " + file + "; COMP_WORDS=(" + words + "); COMP_CWORD=$((${#COMP_WORDS[@]}-1))"
		if strings.HasSuffix(words, " ") {
			line = "source " + file + "; COMP_WORDS=(" + words + " ''); COMP_CWORD=$((${#COMP_WORDS[@]}-1))"
		}
		out, err := exec.Command(bash, "-c", line+`; _contextctl; echo "${COMPREPLY[*]}"`).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%q: got %q (%v), want %q", words, out, err, want)
		}
	}
}

// TestZshCompletion loads the zsh script in zsh and calls the completion
// function as zsh's bashcompinit does (sh emulation); zsh itself filters
// the candidates by what was typed.
func TestZshCompletion(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("no zsh")
	}
	code, script, _ := runMain("completion", "zsh")
	if code != exitOK {
		t.Fatal("completion zsh failed")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "contextctl.zsh")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	harness := "source " + file + `
t() { emulate -L sh; setopt kshglob noshglob braceexpand; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _contextctl; echo "${COMPREPLY[*]}"; }
t contextctl comp
t contextctl --addr x compact s --tier su
`
	cmd := exec.Command(zsh, "-f", "-c", harness)
	cmd.Env = append(os.Environ(), "ZDOTDIR="+dir, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 2 || !strings.Contains(lines[0], "compactions") || lines[1] != "prune summarize drop_middle" {
		t.Errorf("zsh completion: %v\n%s", err, out)
	}
}

// TestEveryCommandIsDocumented: docs/contextctl.md shows each command.
func TestEveryCommandIsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "contextctl.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		if !strings.Contains(string(b), "contextctl "+c.name+" ") {
			t.Errorf("docs/contextctl.md does not show contextctl %s", c.name)
		}
	}
}
