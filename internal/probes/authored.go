package probes

import (
	"regexp"
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// humanAuthored is chat.HumanAuthored, less the observations text-mode
// harnesses send as user messages (observation).
func humanAuthored(m *chat.Message) bool {
	if m.Role != chat.RoleUser || m.Kind == chat.KindSummary || m.Kind == chat.KindPlaceholder {
		return false
	}
	for _, p := range m.Parts {
		if p.Type == chat.PartToolResult {
			return false
		}
	}
	t := strings.TrimSpace(m.Text())
	return t != "" && !observation(t) && !strings.HasPrefix(t, "<environment_context>") && !strings.HasPrefix(t, "<system-reminder>")
}

func standingInstructions(text string) bool {
	return strings.Contains(text, "<user_instructions>") || strings.Contains(text, "# AGENTS.md instructions") || strings.Contains(text, "CLAUDE.md")
}

// observationRe matches what a text-mode harness (mini-swe-agent,
// SWE-agent) sends back as a user message after running the command the
// model wrote: mini-swe-agent's <returncode> envelope, SWE-agent's status
// trailer "(Open file: ...)\n(Current directory: ...)\nbash-$".
var observationRe = regexp.MustCompile(`^<returncode>|\(Current directory: [^\n]*\)\s*\n?bash-\$\s*$`)

// observation reports whether a user message is a harness's observation.
func observation(text string) bool { return observationRe.MatchString(text) }
