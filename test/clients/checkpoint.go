package clients

import (
	"regexp"
	"slices"
	"strings"
)

// Client compactions: a CLI that compacts its own history (Codex's
// auto-compaction past model_auto_compact_token_limit) first asks the
// model for a summary (its compaction prompt as the last user message),
// then goes on from a history of the user messages it kept and that
// summary, without the tool calls and results the provider reads its
// round from. The provider answers the compaction prompt with a checkpoint
// naming the latest tool call it answered, and reads its round from the
// checkpoint of a history that ends with one: the task goes on where it
// was, as a model goes on from its summary.

// compactionPrompts are the CLIs' requests for a summary of the history.
var compactionPrompts = []string{
	"CONTEXT CHECKPOINT COMPACTION", // Codex CLI (codex-rs core/templates/compact/prompt.md)
	// Claude Code's /compact.
	"Your task is to create a detailed summary of the conversation so far",
	// Qwen Code's chat compression (COMPRESSION_REQUEST_DIRECTIVE).
	"produce the <state_snapshot> XML",
}

// stateSnapshot is the provider's summary as Qwen Code asks for it: a
// <state_snapshot> (Qwen Code drops a summary without one) whose goal
// restates what the person typed (texts), the latest first (the task the
// provider reads from the summary), as a model's does, then the
// checkpoint.
func stateSnapshot(texts []string, summary string) string {
	var typed []string // each typed prompt once, in the order typed (a summary restates those before it, the latest first)
	for _, t := range texts {
		ps := typedPrompt.FindAllString(t, -1)
		if strings.Contains(t, "<state_snapshot>") {
			slices.Reverse(ps)
		}
		for _, p := range ps {
			p = strings.TrimSpace(p)
			typed = append(slices.DeleteFunc(typed, func(q string) bool { return q == p }), p)
		}
	}
	slices.Reverse(typed)
	return "<analysis>The history was read.</analysis>\n<state_snapshot>\n<overall_goal>\n" + strings.Join(typed, "\n") +
		"\n</overall_goal>\n<current_plan>\n" + summary + "\n</current_plan>\n</state_snapshot>"
}

// typedPrompt is a prompt the person typed (prompt), within a text.
var typedPrompt = regexp.MustCompile(`TASK=[^\n<]*`)

// checkpointMark is the provider's summary: the last call it answered.
var checkpointMark = regexp.MustCompile(`CHECKPOINT after ((?:call|toolu)_r\d+of\d+_\d+)`)

// asksCompaction reports whether text (the last user message) is a CLI's
// request for a summary of its history.
func asksCompaction(text string) bool {
	for _, p := range compactionPrompts {
		if strings.Contains(text, p) {
			return true
		}
	}
	return false
}

// checkpoint is the summary the provider answers a compaction prompt
// with, lastCall the latest tool call of the history.
func checkpoint(lastCall string) string {
	return "Progress summary: CHECKPOINT after " + lastCall + " (every earlier round is done)."
}

// checkpointCall is the call a compaction prompt's checkpoint names:
// latest, the latest call output the request shows, or else the latest
// round's call the provider made in this turn. contextd may have
// summarized every call and output of the view away (a 16k window with
// 40 KB outputs); its summary's trail names the commands run, from which
// a model knows where it was, so the provider does too. Before, the
// checkpoint named no call, the task started over from round 1 after each
// compaction, and Codex compacted to the same history forever.
func (p *Provider) checkpointCall(latest string) string {
	if latest != "" {
		return latest
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.issued[p.conv]
}

// sameCheckpoint is the provider's summary when it writes the same one
// each time (Provider.sameSummary).
const sameCheckpoint = "Progress summary: CHECKPOINT after the latest call (every earlier round is done)."

// summary is the provider's answer to a compaction prompt of a request
// whose latest call output is latest ("" when it shows none).
func (p *Provider) summary(latest string) string {
	if p.sameSummary {
		return sameCheckpoint
	}
	return checkpoint(p.checkpointCall(latest))
}

// resumedCall is the call a history whose last user message is text goes
// on after: the one its checkpoint names, or for the same summary each
// time, the latest round's call the provider made in this turn.
func (p *Provider) resumedCall(text string) string {
	if strings.Contains(text, sameCheckpoint) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.issued[p.conv]
	}
	return resumedCall(text)
}

// resumedCall is the call a history that ends with the provider's
// checkpoint (text, the last user message) goes on after; "" otherwise.
func resumedCall(text string) string {
	if m := checkpointMark.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}

// compactionAsks is how many requests asked for a summary of the history.
func (p *Provider) compactionAsks() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if c.Compaction {
			n++
		}
	}
	return n
}
