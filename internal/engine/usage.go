package engine

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/tokens"
)

// Source says where a usage figure comes from.
type Source int

// Sources.
const (
	SourceEstimated  Source = iota + 1 // local count
	SourceCalibrated                   // local count corrected by a learned ratio
	SourceAnchored                     // provider's count for a prefix + local estimate
	SourceProvider                     // counted by the provider's endpoint
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

// InlineUsage measures a request given inline, calibrated with the
// tenant's learned ratio for approximate models.
func (e *Engine) InlineUsage(ctx context.Context, tenant string, in InlineContext) (Usage, error) {
	m, known := e.models.Lookup(in.Model)
	if err := chat.CheckStructure("inline.messages", in.Messages); err != nil {
		return Usage{}, err
	}
	release, err := e.admitCount(ctx, tokens.FramingOf(m), "", in.System, in.Tools, in.Messages)
	if err != nil {
		return Usage{}, err
	}
	defer release()
	if err := validateRequest(in.Tools, in.Messages, "inline.tools", "inline.messages"); err != nil {
		return Usage{}, err
	}
	policy, err := compaction.Resolve("inline.policy", in.Policy, m.ContextWindow)
	if err != nil {
		return Usage{}, err
	}
	enc, err := e.encodings.Get(m.Encoding)
	if err != nil {
		return Usage{}, encodingError(m.Encoding, err)
	}
	rc := tokens.CountRequest(enc, tokens.FramingOf(m), in.System, in.Tools, in.Messages)
	release()
	cal, err := e.calibration(ctx, tenant, m)
	if err != nil {
		return Usage{}, err
	}
	u := estimate{system: rc.System, tools: rc.Tools, messages: rc.Messages}.usage(m, known, policy, cal, int64(len(in.Messages)))
	if n, warn := e.providerCount(ctx, m, in.System, in.Tools, in.Messages); n > 0 {
		system, tools := min(rc.System, n), min(rc.Tools, n-min(rc.System, n))
		u = measure(m, known, policy, system, tools, n-system-tools, int64(len(in.Messages)))
		u.Source, u.ExpectedError = SourceProvider, 0
	} else if warn != "" {
		u.Warnings = append(u.Warnings, warn)
	}
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

// estimate is a local count, to be calibrated and anchored.
type estimate struct {
	system, tools, messages int64
	// anchor, when set, is a session whose AnchorInput is the provider's count
	// of an earlier state of this same request.
	anchor *store.Session
}

func (e estimate) local() int64 { return e.system + e.tools + e.messages }

// usage applies, in order: the learned ratio (approximate models), then the
// anchor (the provider's exact count of the prefix plus an estimate of what
// came after it).
func (e estimate) usage(m tokens.Model, known bool, p compaction.Policy, cal *store.Calibration, count int64) Usage {
	ratio, source, expErr := 1.0, SourceEstimated, m.ExpectedError
	if cal != nil && cal.Samples > 0 && !m.Exact {
		ratio, source = cal.Ratio, SourceCalibrated
		expErr = calibratedError(cal.Samples)
	}
	scale := func(n int64) int64 { return int64(math.Round(float64(n) * ratio)) }
	system, tools := scale(e.system), scale(e.tools)
	used := scale(e.local())
	if a := e.anchor; a != nil {
		delta := e.local() - a.AnchorLocal
		used = a.AnchorInput + scale(delta)
		source = SourceAnchored
		expErr = math.Abs(float64(delta)) * expErr / float64(max(used, 1))
	}
	u := measure(m, known, p, system, tools, used-system-tools, count)
	u.Source, u.ExpectedError = source, expErr
	return u
}

// calibratedError is the expected error once a ratio has been learned from
// n reports.
func calibratedError(n int) float64 {
	switch {
	case n >= 3:
		return 0.02
	default:
		return 0.05
	}
}

// calibration returns the tenant's learned ratio for an approximate model
// (nil when the model is exact or nothing was learned yet).
func (e *Engine) calibration(ctx context.Context, tenant string, m tokens.Model) (*store.Calibration, error) {
	if m.Exact || e.store == nil {
		return nil, nil
	}
	c, err := e.store.GetCalibration(ctx, tenant, m.Name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// ProviderCounter counts a request with the provider's own endpoint.
type ProviderCounter interface {
	Count(ctx context.Context, model, system string, tools []chat.Tool, msgs []chat.Message) (tokens int64, cached bool, err error)
}

// providerCount asks the provider to count a request of one of its models,
// when a counter is configured. It returns 0 and a warning when it could not
// (the caller keeps its local count).
func (e *Engine) providerCount(ctx context.Context, m tokens.Model, system string, tools []chat.Tool, msgs []chat.Message) (int64, string) {
	if e.counter == nil || m.Provider != "anthropic" || len(msgs) == 0 {
		return 0, ""
	}
	n, _, err := e.counter.Count(ctx, m.Name, system, tools, msgs)
	if err != nil {
		return 0, "provider token counting failed; the local estimate is used: " + err.Error()
	}
	return n, ""
}
