package contextctl

import (
	"flag"
	"fmt"
	"sort"
	"strings"
)

// Exit codes, stated in --help and docs/contextctl.md.
const (
	exitOK          = 0 // the command did what it says
	exitFailed      = 1 // the server refused the call (its code and message are printed) or a file could not be read
	exitUsage       = 2 // bad usage: unknown command or flag, wrong arguments
	exitUnreachable = 3 // the server could not be reached (UNAVAILABLE)
)

// command is one contextctl command: its arguments, what it does, and the
// flags that apply to it. The one table drives --help, the check that a
// flag applies to the command it is given with, and shell completion.
type command struct {
	name, args, summary string
	flags               []string
	// session: the first argument is a session id (completion offers them).
	session bool
}

// barFlags are the flags of commands that draw the context bar.
var barFlags = []string{"width", "no-color"}

var commands = []command{
	{name: "create", args: "SESSION", summary: "create a session (--model; --system or --system-file, --tools-file, --labels)",
		flags: []string{"model", "system", "system-file", "tools-file", "labels", "width", "no-color"}},
	{name: "append", args: "SESSION [TEXT...|-]", session: true, summary: "append a message: TEXT, --file FILE, or - for JSON on stdin (a message, an array, or {\"messages\": [...]}); --role",
		flags: []string{"role", "file", "idempotency-key", "expected-version", "width", "no-color"}},
	{name: "prepare", args: "SESSION [TEXT...|-]", session: true, summary: "PrepareContext: append (as append does, or nothing), compact per policy, show what to send",
		flags: []string{"role", "file", "idempotency-key", "expected-version", "width", "no-color"}},
	{name: "report", args: "SESSION", session: true, summary: "report a model call's usage (--input, --output, --cache-read, --cache-write; --view-token)",
		flags: []string{"input", "output", "cache-read", "cache-write", "view-token", "width", "no-color"}},
	{name: "usage", args: "SESSION", session: true, summary: "the context bar of a session", flags: barFlags},
	{name: "watch", args: "SESSION", session: true, summary: "the bar, redrawn live from WatchContextStatus", flags: barFlags},
	{name: "messages", args: "SESSION", session: true, summary: "the active view (what is sent to the model), or the whole log with --log", flags: []string{"log"}},
	{name: "compact", args: "SESSION", session: true, summary: "compact now (--dry-run, --tier prune|summarize|drop_middle, --target, --instructions)",
		flags: []string{"dry-run", "tier", "target", "instructions", "width", "no-color"}},
	{name: "compactions", args: "SESSION", session: true, summary: "the compaction history, in round order, with each one's state"},
	{name: "revert", args: "SESSION COMPACTION", session: true, summary: "undo a compaction (the newest applied one first)", flags: barFlags},
	{name: "expand", args: "SESSION MESSAGE", session: true, summary: "the originals behind a placeholder or summary"},
	{name: "update", args: "SESSION", session: true, summary: "change the session (--model, --system or --system-file, --labels); only the flags given change",
		flags: []string{"model", "system", "system-file", "labels", "expected-version", "width", "no-color"}},
	{name: "clear", args: "SESSION", session: true, summary: "empty the active view, keeping system prompt and tools (--keep-task); undo it with revert",
		flags: []string{"keep-task", "expected-version", "width", "no-color"}},
	{name: "handoff", args: "SESSION", session: true, summary: "a hand-off document (--new-session [--new-id ID])", flags: []string{"new-session", "new-id"}},
	{name: "delete", args: "SESSION", session: true, summary: "delete a session"},
	{name: "sessions", summary: "list sessions, newest first (--label key=value)", flags: []string{"label"}},
	{name: "count", args: "[FILE|-]", summary: "count the tokens of a file or stdin (--model or --encoding)", flags: []string{"model", "encoding"}},
	{name: "models", summary: "the model registry"},
	{name: "completion", args: "bash|zsh", summary: "print a shell completion script (source <(contextctl completion bash))"},
}

// globalFlags apply to every command.
var globalFlags = []string{"addr", "token", "tls", "ca-file", "cert-file", "key-file", "server-name", "json"}

func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// checkFlags refuses a flag given with a command it does not apply to, so
// that a typo such as "usage S --dry-run" is an error, not ignored.
func (c command) checkFlags(fs *flag.FlagSet) error {
	allowed := map[string]bool{}
	for _, f := range append(append([]string{}, globalFlags...), c.flags...) {
		allowed[f] = true
	}
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if !allowed[f.Name] {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		sort.Strings(bad)
		return usageError{fmt.Sprintf("%s does not apply to %s (contextctl --help lists each command's flags)", strings.Join(bad, ", "), c.name)}
	}
	return nil
}

// usage is contextctl --help, built from the command table and the flags.
func usage(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString(`contextctl talks to a contextd server.

Usage:
  contextctl COMMAND [ARGS] [FLAGS]      flags may come before or after the command and its arguments

Commands:
`)
	for _, c := range commands {
		head := c.name
		if c.args != "" {
			head += " " + c.args
		}
		fmt.Fprintf(&b, "  %-26s %s\n", head, c.summary)
	}
	b.WriteString("\nFlags (the commands each applies to in brackets):\n")
	applies := map[string][]string{}
	for _, c := range commands {
		for _, f := range c.flags {
			applies[f] = append(applies[f], c.name)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		name, use := flag.UnquoteUsage(f)
		head := "--" + f.Name
		if name != "" {
			head += " " + name
		}
		where := "all"
		if cs := applies[f.Name]; len(cs) > 0 {
			where = strings.Join(cs, ", ")
		}
		fmt.Fprintf(&b, "  %-26s %s [%s]\n", head, use, where)
	})
	b.WriteString(`
Environment: CONTEXTD_ADDR (default localhost:50051), CONTEXTD_TOKEN (an API key, sent as a bearer token), NO_COLOR.

Exit codes:
  0  the command did what it says
  1  the server refused the call (its code and message are printed), or a file could not be read
  2  bad usage: an unknown command or flag, a flag that does not apply, wrong arguments
  3  the server could not be reached
`)
	return b.String()
}
