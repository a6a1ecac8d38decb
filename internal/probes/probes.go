// Package probes computes, deterministically and without a model, what an
// agent should still be able to answer about its own transcript after a
// compaction: the artifacts it acted on (files read, created or edited and
// by which call, commands with their exit status, tests with their last
// result, each error's first line, URLs), the instructions it was given
// (every human-authored user message, standing instructions) and the state
// it left (the last edit of each file, the tests last seen failing).
//
// It reads any tool-call shape: Claude Code (Bash, Read, Edit, MultiEdit,
// Write, NotebookEdit, WebFetch), Codex (shell with an argv, exec_command,
// apply_patch), OpenHands (execute_bash, str_replace_editor), SWE-agent
// (open, create, edit, find_file) and any tool whose arguments name a
// command or a path, and text-mode agents that write their command in a
// fenced block and get its output as the next user message.
//
// The recall benchmark (internal/costbench) scores a view against the
// probes; the exact artifact trail of every summary (internal/summarize)
// is written from the same events.
package probes

import (
	"strings"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/chat"
)

// Kind is what a probe asks about.
type Kind string

// Kinds of events and probes.
const (
	File     Kind = "file"     // a path read, created or edited (Action)
	Command  Kind = "command"  // a command run (Status: its exit status)
	Test     Kind = "test"     // a test named in an output (Status: pass or fail)
	Error    Kind = "error"    // the first line of an error
	URL      Kind = "url"      // a URL anywhere in the transcript
	User     Kind = "user"     // a human-authored user message (Text: all of it)
	Standing Kind = "standing" // standing instructions (CLAUDE.md, AGENTS.md, ...)
	// State probes.
	LastEdit    Kind = "last_edit"    // the last edit of a file: its path and the message that made it
	FailingTest Kind = "failing_test" // a test whose latest result is a failure
)

// Class groups kinds as the recall benchmark reports them.
type Class string

// Classes.
const (
	Artifact    Class = "artifact"
	Instruction Class = "instruction"
	State       Class = "state"
)

// ClassOf returns the class of a kind.
func ClassOf(k Kind) Class {
	switch k {
	case User, Standing:
		return Instruction
	case LastEdit, FailingTest:
		return State
	}
	return Artifact
}

// Actions on files, and test results.
const (
	Read   = "read"
	Create = "create"
	Edit   = "edit"
	Delete = "delete"
	Pass   = "pass"
	Fail   = "fail"
)

// Event is one thing that happened in a transcript, in order.
type Event struct {
	Kind Kind
	// Text is the probe's verbatim answer: a path, the head of a command
	// (Head), a test id, an error line (Head), a URL or a user message.
	Text string
	// Action is what was done to a file (Read, Create, Edit, Delete).
	Action string
	// Status is a command's exit status ("0", "1", ..., "error" when the
	// tool said it failed without a code, "" when unknown) or a test's
	// result (Pass, Fail).
	Status string
	// Hash is the sha256 (12 hex digits) of a file's content when the call
	// wrote all of it (Write, create).
	Hash string
	// Cut says Text is the head of a longer command or error line.
	Cut bool
	// Index is the index in the transcript of the message it comes from:
	// the call for files and commands, the output for tests and errors.
	Index  int
	MsgID  string // that message's id, when it has one
	CallID string // the tool call's id, when there is one
	Tool   string // the tool's name, when there is one
}

// MaxHead is the longest command or error line a probe or a trail line
// quotes, in bytes; a longer one is quoted up to a word boundary (Head).
const MaxHead = 160

// Head returns the first line of s, trimmed, at most MaxHead bytes: a longer
// line is cut after its last whole word that fits (never inside a word, an
// identifier or a path), and the second result says it was cut.
func Head(s string) (string, bool) {
	s = strings.TrimSpace(s)
	line, _, more := strings.Cut(s, "\n")
	line = strings.TrimSpace(line)
	if len(line) <= MaxHead {
		return line, more
	}
	return CutAtSpace(line, MaxHead), true
}

// CutAtSpace returns the longest prefix of s of at most n bytes that ends
// before a space (so no word is cut), trimmed; when the first word alone is
// longer than n, it is returned whole, unless it is longer than 4n: such a
// run of text without a space (a minified line, a blob) is no word, and is
// cut at a character boundary at n.
func CutAtSpace(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if i := strings.LastIndexAny(s[:n+1], " \t\n"); i > 0 {
		return strings.TrimRight(s[:i], " \t\n,;:")
	}
	i := strings.IndexAny(s, " \t\n")
	if i < 0 {
		i = len(s)
	}
	if i <= 4*n {
		return s[:i]
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Probe is one question about a transcript and its verbatim answers.
type Probe struct {
	Kind Kind
	// Needles must all be verbatim in the view for the probe to be in view.
	Needles []string
	// Origin is the id of the message that holds the answer (the latest
	// one when it recurs); a view that still holds that message holds the
	// probe.
	Origin string
	Index  int
}

// Class is the probe's class.
func (p Probe) Class() Class { return ClassOf(p.Kind) }

// Of returns the probes of the events that come from the first n messages
// (all of them when n < 0), one per question, answered by its latest
// occurrence, in a deterministic order.
func Of(events []Event, n int) []Probe {
	type key struct {
		k    Kind
		text string
	}
	at := map[key]int{}
	var out []Probe
	add := func(p Probe) {
		k := key{p.Kind, strings.Join(p.Needles, "\x00")}
		if i, ok := at[k]; ok {
			out[i] = p
			return
		}
		at[k] = len(out)
		out = append(out, p)
	}
	lastEdit := map[string]Event{}
	var editOrder []string
	tests := map[string]Event{}
	var testOrder []string
	for _, e := range events {
		if n >= 0 && e.Index >= n {
			continue
		}
		if e.Text == "" {
			continue
		}
		add(Probe{Kind: e.Kind, Needles: []string{e.Text}, Origin: e.MsgID, Index: e.Index})
		switch {
		case e.Kind == File && (e.Action == Edit || e.Action == Create || e.Action == Delete):
			if _, ok := lastEdit[e.Text]; !ok {
				editOrder = append(editOrder, e.Text)
			}
			lastEdit[e.Text] = e
		case e.Kind == Test:
			if _, ok := tests[e.Text]; !ok {
				testOrder = append(testOrder, e.Text)
			}
			tests[e.Text] = e
		}
	}
	for _, path := range editOrder {
		e := lastEdit[path]
		needles := []string{path}
		if e.MsgID != "" {
			needles = append(needles, e.MsgID)
		}
		out = append(out, Probe{Kind: LastEdit, Needles: needles, Origin: e.MsgID, Index: e.Index})
	}
	for _, name := range testOrder {
		if e := tests[name]; e.Status == Fail {
			out = append(out, Probe{Kind: FailingTest, Needles: []string{name}, Origin: e.MsgID, Index: e.Index})
		}
	}
	return out
}

// Extract returns the events of a transcript, in order. Messages carry ids
// when they are stored ones (MsgID is then set). Work is linear in the text
// of msgs; an output's tests, errors and URLs are read from at most
// maxOutputScan bytes of it.
func Extract(msgs []chat.Message) []Event {
	x := extractor{results: map[string]int{}, human: chat.HumanAuthoredIn(msgs)}
	for i := range msgs {
		for _, p := range msgs[i].Parts {
			if p.Type == chat.PartToolResult {
				x.results[p.ToolResult.ToolCallID] = i
			}
		}
	}
	for i := range msgs {
		x.message(msgs, i)
	}
	return x.events
}

type extractor struct {
	events  []Event
	results map[string]int // tool call id → index of its result
	human   []bool         // chat.HumanAuthoredIn
	// open is the file an editor-style agent (SWE-agent) has open, from
	// its "(Open file: PATH)" status line: its edit commands name no path.
	open string
}

func (x *extractor) add(e Event) { x.events = append(x.events, e) }

func (x *extractor) message(msgs []chat.Message, i int) {
	m := &msgs[i]
	base := Event{Index: i, MsgID: m.ID}
	switch m.Role {
	case chat.RoleUser:
		text := strings.TrimSpace(m.Text())
		if standing := chat.StandingInstructionsIn(m); standing || x.human[i] {
			// Standing instructions count whether or not the message is
			// all scaffolding (Codex sends them in <user_instructions>).
			kind := User
			if standing {
				kind = Standing
			}
			e := base
			e.Kind, e.Text = kind, text
			x.add(e)
			x.urls(text, base)
			return
		}
		if chat.Scaffolding(text) && exitStatus(text) == "" {
			return // environment context, reminders: nobody's output
		}
		// An observation a text-mode harness sends as a user message.
		x.output(m.Text(), false, base)
	case chat.RoleTool:
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult {
				x.output(p.ToolResult.Content, p.ToolResult.IsError, base)
			}
		}
	case chat.RoleAssistant:
		calls := 0
		for _, p := range m.Parts {
			if p.Type != chat.PartToolCall {
				continue
			}
			calls++
			e := base
			e.CallID, e.Tool = p.ToolCall.ID, p.ToolCall.Name
			status := ""
			if r, ok := x.results[p.ToolCall.ID]; ok {
				status = statusOf(toolResultOf(&msgs[r]))
			}
			x.call(p.ToolCall.Name, p.ToolCall.Arguments, status, e)
		}
		text := m.Text()
		x.urls(text, base)
		if calls == 0 {
			// Text mode: the commands are fenced, the output is the next
			// user message.
			status := ""
			if i+1 < len(msgs) && msgs[i+1].Role == chat.RoleUser && !x.human[i+1] {
				status = exitStatus(msgs[i+1].Text())
			}
			for _, block := range fenced(text) {
				x.shell(block, status, base)
			}
		}
	}
}

func toolResultOf(m *chat.Message) *chat.ToolResult {
	for _, p := range m.Parts {
		if p.Type == chat.PartToolResult {
			return p.ToolResult
		}
	}
	return nil
}

func statusOf(r *chat.ToolResult) string {
	if r == nil {
		return ""
	}
	if s := exitStatus(r.Content); s != "" {
		return s
	}
	if r.IsError {
		return "error"
	}
	return ""
}
