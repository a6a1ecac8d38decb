package engine

import (
	"context"
	"fmt"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/tokens"
)

// Source says where a usage figure comes from.
type Source int

// Sources.
const (
	SourceEstimated  Source = iota + 1 // local count
	SourceCalibrated                   // local count corrected by a learned ratio
	SourceAnchored                     // provider's count for a prefix + local estimate
)

// Usage is where a context window goes and how full it is.
type Usage struct {
	Model          string
	ModelKnown     bool
	Encoding       string
	Exact          bool
	ContextWindow  int64
	SystemTokens   int64
	ToolsTokens    int64
	MessagesTokens int64
	MessageCount   int64
	ReservedOutput int64
	Used           int64
	Free           int64
	Over           int64
	PercentUsed    float64
	Policy         compaction.Policy
	Level          compaction.Level
	WillCompact    bool
	Recommendation string
	Source         Source
	ExpectedError  float64
	Warnings       []string
}

// InlineContext is a request given in full, without a stored session.
type InlineContext struct {
	Model    string
	System   string
	Tools    []chat.Tool
	Messages []chat.Message
	Policy   compaction.Overrides
}

// InlineUsage measures a request given inline.
func (e *Engine) InlineUsage(_ context.Context, in InlineContext) (Usage, error) {
	m, known := e.models.Lookup(in.Model)
	if err := validateRequest(in.Tools, in.Messages, "inline.tools", "inline.messages"); err != nil {
		return Usage{}, err
	}
	policy, err := compaction.Resolve("inline.policy", in.Policy, m.ContextWindow)
	if err != nil {
		return Usage{}, err
	}
	enc, err := e.encodings.Get(m.Encoding)
	if err != nil {
		return Usage{}, fmt.Errorf("encoding %s: %w", m.Encoding, err)
	}
	rc := tokens.CountRequest(enc, tokens.FramingOf(m), in.System, in.Tools, in.Messages)
	u := measure(m, known, policy, rc.System, rc.Tools, rc.Messages, int64(len(in.Messages)))
	u.Model = in.Model
	if !known {
		u.Warnings = append(u.Warnings, unknownModelWarning(in.Model))
	}
	return u, nil
}

// measure turns token figures into a Usage under a policy.
func measure(m tokens.Model, known bool, p compaction.Policy, system, tools, messages, count int64) Usage {
	u := Usage{
		Model: m.Name, ModelKnown: known, Encoding: m.Encoding, Exact: m.Exact,
		ContextWindow: m.ContextWindow, SystemTokens: system, ToolsTokens: tools,
		MessagesTokens: messages, MessageCount: count, ReservedOutput: p.ReservedOutputTokens,
		Policy: p, Source: SourceEstimated, ExpectedError: m.ExpectedError,
	}
	u.Used = system + tools + messages
	usable := m.ContextWindow - p.ReservedOutputTokens
	if u.Used <= usable {
		u.Free = usable - u.Used
	} else {
		u.Over = u.Used - usable
	}
	fraction := float64(u.Used) / float64(usable)
	u.PercentUsed = 100 * fraction
	u.Level = p.LevelAt(fraction)
	u.WillCompact = p.AutoCompact && u.Level >= compaction.LevelCompact
	u.Recommendation = recommend(u)
	return u
}

func recommend(u Usage) string {
	if u.Over > 0 {
		return fmt.Sprintf("The request does not fit: it is %d tokens over the usable window (%d of %d tokens, %d reserved for output); compact or start a new session from a hand-off.",
			u.Over, u.Used, u.ContextWindow, u.ReservedOutput)
	}
	switch u.Level {
	case compaction.LevelHandoff:
		return fmt.Sprintf("%.0f%% used, past the emergency threshold (%.0f%%): start a new session from a hand-off document.", u.PercentUsed, 100*u.Policy.EmergencyThreshold)
	case compaction.LevelSummarize:
		return fmt.Sprintf("%.0f%% used, past the critical threshold (%.0f%%): summarize older turns.", u.PercentUsed, 100*u.Policy.CriticalThreshold)
	case compaction.LevelCompact:
		return fmt.Sprintf("%.0f%% used, past the warning threshold (%.0f%%): prune old tool output (reversible).", u.PercentUsed, 100*u.Policy.WarningThreshold)
	default:
		return fmt.Sprintf("%.0f%% used: no action needed; %d tokens free.", u.PercentUsed, u.Free)
	}
}
