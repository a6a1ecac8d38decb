package probes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// Argument keys that name a file, and those that hold a file's whole new
// content, over the tool shapes this package knows (and any other that uses
// the same words).
var (
	pathKeys    = []string{"file_path", "path", "filename", "file_name", "notebook_path", "file", "target_file", "filepath"}
	contentKeys = []string{"content", "file_text", "contents"}
	commandKeys = []string{"command", "cmd", "script"}
	patchKeys   = []string{"input", "patch", "diff"}
)

// editorCommands are the sub-commands of an editor tool (OpenHands'
// str_replace_editor, Anthropic's text editor) passed as "command": not a
// shell command.
var editorCommands = map[string]string{
	"view": Read, "create": Create, "str_replace": Edit, "insert": Edit, "undo_edit": Edit,
	"write": Create, "append": Edit, "delete": Delete,
}

// call records what one tool call did.
func (x *extractor) call(name, arguments, status string, e Event) {
	args := map[string]any{}
	_ = json.Unmarshal([]byte(arguments), &args) // not JSON: no keys, only the name speaks
	lname := strings.ToLower(name)
	path := firstString(args, pathKeys)
	content, hasContent := firstStringOK(args, contentKeys)
	cmd := commandOf(args)

	// An editor tool: "command" is its sub-command.
	if action, ok := editorCommands[cmd]; ok && path != "" {
		x.file(path, action, hashIf(content, hasContent && action == Create), e)
		return
	}
	if p := firstString(args, patchKeys); strings.Contains(p, "*** ") || strings.Contains(p, "+++ ") {
		x.patch(p, e)
		return
	}
	switch {
	case path != "" && hasContent: // Write, create with text
		action := Edit
		if strings.Contains(lname, "create") || strings.Contains(lname, "write") {
			action = Create
		}
		x.file(path, action, hashIf(content, true), e)
		return
	case path != "" && containsAny(lname, "edit", "replace", "patch", "insert", "notebook"):
		x.file(path, Edit, "", e)
		return
	case path != "" && cmd == "":
		action := Read
		if containsAny(lname, "create", "touch", "mkdir") {
			action = Create
		} else if containsAny(lname, "delete", "remove") {
			action = Delete
		}
		x.file(path, action, "", e)
		return
	case cmd == "" && x.open != "" && containsAny(lname, "edit", "replace", "insert"):
		x.file(x.open, Edit, "", e) // SWE-agent's edit: the open file
		return
	}
	if u := firstString(args, []string{"url"}); u != "" {
		x.add(Event{Kind: URL, Text: u, Index: e.Index, MsgID: e.MsgID, CallID: e.CallID, Tool: e.Tool})
	}
	if cmd != "" {
		x.shell(cmd, status, e)
	}
}

// shell records a shell command (or an editor-style command of SWE-agent:
// open, create, edit): the command, and the files its words name.
func (x *extractor) shell(cmd, status string, e Event) {
	cmd = strings.TrimSpace(cmd)
	if cmd == "" {
		return
	}
	if strings.Contains(cmd, "*** Begin Patch") || strings.Contains(cmd, "\n+++ ") {
		x.patch(cmd, e)
	}
	head, cut := Head(cmd)
	c := e
	c.Kind, c.Text, c.Status, c.Cut = Command, head, status, cut
	x.add(c)
	x.commandFiles(cmd, e)
}

// patch records the files of an apply_patch envelope or a unified diff.
func (x *extractor) patch(p string, e Event) {
	for _, line := range strings.Split(p, "\n") {
		line = strings.TrimSpace(line)
		for prefix, action := range map[string]string{"*** Update File: ": Edit, "*** Add File: ": Create,
			"*** Delete File: ": Delete, "*** Move to: ": Create} {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				x.file(strings.TrimSpace(rest), action, "", e)
			}
		}
		if rest, ok := strings.CutPrefix(line, "+++ "); ok && !strings.HasPrefix(rest, "/dev/null") {
			rest = strings.TrimPrefix(strings.Fields(rest + " ")[0], "b/")
			x.file(rest, Edit, "", e)
		}
	}
}

// Verbs of shell commands by what they do to the files they name.
var (
	readVerbs   = []string{"cat", "head", "tail", "less", "more", "nl", "grep", "egrep", "rg", "awk", "wc", "diff", "open", "view", "bat", "sed"}
	editVerbs   = []string{"edit", "patch", "ed", "tee", "truncate", "chmod"}
	createVerbs = []string{"create", "touch", "mkdir", "cp", "mv"}
	deleteVerbs = []string{"rm", "rmdir", "unlink"}
)

var (
	segmentSep = regexp.MustCompile(`&&|\|\||;|\||\n`)
	// pathWord is a word that names a file: it has a slash, or ends in an
	// extension.
	pathWord = regexp.MustCompile(`^(?:~|\.{1,2})?/?(?:[\w.@+-]+/)*[\w.@+-]*[\w]$`)
	extWord  = regexp.MustCompile(`\.[A-Za-z][A-Za-z0-9]{0,7}$`)
	redirect = regexp.MustCompile(`>>?\s*("[^"]+"|'[^']+'|[^\s;&|<>]+)`)
)

// commandFiles records the files a command names, by its verbs. Heredoc
// bodies are not read (their words are content, not paths); only the
// command's lines before them.
func (x *extractor) commandFiles(cmd string, e Event) {
	if i := strings.Index(cmd, "<<"); i >= 0 {
		line, _, _ := strings.Cut(cmd[i:], "\n")
		cmd = cmd[:i] + line
	}
	for _, seg := range segmentSep.Split(cmd, -1) {
		words := strings.Fields(seg)
		if len(words) == 0 {
			continue
		}
		verb := words[0]
		if verb == "sudo" || verb == "env" || verb == "time" {
			words = words[1:]
			if len(words) == 0 {
				continue
			}
			verb = words[0]
		}
		verb = verb[strings.LastIndexByte(verb, '/')+1:]
		action := ""
		switch {
		case (verb == "sed" || verb == "perl") && slices.ContainsFunc(words, func(w string) bool { return strings.HasPrefix(w, "-i") }):
			action = Edit
		case slices.Contains(readVerbs, verb):
			action = Read
		case slices.Contains(editVerbs, verb):
			action = Edit
		case slices.Contains(createVerbs, verb):
			action = Create
		case slices.Contains(deleteVerbs, verb):
			action = Delete
		}
		for _, m := range redirect.FindAllStringSubmatch(seg, -1) {
			if p := cleanWord(m[1]); isPath(p) && p != "/dev/null" {
				x.file(p, Edit, "", e)
			}
		}
		if action == "" {
			continue
		}
		if verb == "edit" && x.open != "" { // SWE-agent: edit N:M edits the open file
			x.file(x.open, Edit, "", e)
			continue
		}
		for _, w := range words[1:] {
			if strings.HasPrefix(w, ">") {
				break
			}
			if p := cleanWord(w); isPath(p) {
				x.file(p, action, "", e)
			}
		}
	}
}

func cleanWord(w string) string {
	w = strings.Trim(w, `"'`+"`(),")
	if i := strings.IndexByte(w, ':'); i > 0 && !strings.Contains(w[:i], "/") && len(w[:i]) > 1 {
		return "" // a URL scheme or host:port
	}
	w, _, _ = strings.Cut(w, "::") // pytest node ids name their file first
	if i := strings.IndexByte(w, ':'); i > 0 {
		w = w[:i] // path:line
	}
	return w
}

// isPath reports whether a word of a command names a file.
func isPath(w string) bool {
	if len(w) < 3 || strings.HasPrefix(w, "-") || strings.ContainsAny(w, "*?$={}[]\\") || !pathWord.MatchString(w) {
		return false
	}
	return strings.Contains(w, "/") || extWord.MatchString(w)
}

// file records a file event.
func (x *extractor) file(path, action, hash string, e Event) {
	path = strings.TrimSpace(path)
	if path == "" {
		return
	}
	f := e
	f.Kind, f.Text, f.Action, f.Hash = File, path, action, hash
	x.add(f)
}

func hashIf(content string, ok bool) string {
	if !ok {
		return ""
	}
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:6])
}

// commandOf returns the shell command of a call's arguments: a string, or
// an argv whose last element is the script of "bash -lc" (Codex).
func commandOf(args map[string]any) string {
	for _, k := range commandKeys {
		switch v := args[k].(type) {
		case string:
			return v
		case []any:
			var words []string
			for _, w := range v {
				if s, ok := w.(string); ok {
					words = append(words, s)
				}
			}
			if n := len(words); n >= 3 && (words[n-2] == "-lc" || words[n-2] == "-c") {
				return words[n-1]
			}
			return strings.Join(words, " ")
		}
	}
	return ""
}

func firstString(args map[string]any, keys []string) string {
	s, _ := firstStringOK(args, keys)
	return s
}

func firstStringOK(args map[string]any, keys []string) (string, bool) {
	for _, k := range keys {
		if s, ok := args[k].(string); ok {
			return s, true
		}
	}
	return "", false
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// fenceRe matches a fenced block: its info string and body.
var fenceRe = regexp.MustCompile("(?s)```([\\w-]*)[ \\t]*\\n(.*?)```")

// fenced returns the shell blocks of an assistant's text: fenced blocks
// without an info string or with a shell one.
func fenced(text string) []string {
	var out []string
	for _, m := range fenceRe.FindAllStringSubmatch(text, -1) {
		switch strings.ToLower(m[1]) {
		case "", "bash", "sh", "shell", "console", "zsh":
			out = append(out, m[2])
		}
	}
	return out
}
