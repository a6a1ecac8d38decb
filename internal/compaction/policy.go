// Package compaction owns the compaction policy: thresholds, the levels they
// define, and (with the compaction engine) the pure planning of tiers. It does
// no I/O.
package compaction

import (
	"fmt"

	"github.com/contextd/contextd/internal/chat"
)

// Level is how full a context window is.
type Level int

// Levels, in increasing order of urgency.
const (
	LevelOK        Level = iota + 1 // below the warning threshold
	LevelCompact                    // reversible pruning allowed
	LevelSummarize                  // lossy summarization allowed
	LevelHandoff                    // a hand-off is recommended
)

// Policy is a fully resolved compaction policy: every field has a value.
type Policy struct {
	WarningThreshold         float64
	CriticalThreshold        float64
	EmergencyThreshold       float64
	Target                   float64
	KeepRecentTokens         int64
	KeepRecentMessages       int
	ProtectRecentToolResults int
	AutoCompact              bool
	ReservedOutputTokens     int64
	SummaryMaxTokens         int
	// Summarizer names the summarizer: "" (the server's default),
	// "extractive", "openai:MODEL" or "anthropic:MODEL".
	Summarizer string
	// CachePaybackCalls: below the emergency threshold, auto-compaction
	// runs only when its savings repay the prompt-cache rewrite within this
	// many calls (0: cache-awareness off). See Payback.
	CachePaybackCalls int
	// CacheTarget is where every automatic compaction aims, in place of
	// Target, when cache-awareness is on: deep, since a compaction's
	// rewrite costs about the same whatever it removes.
	CacheTarget float64
	// ExposeExpandTool adds the contextd_expand tool to the prepared view
	// and makes every placeholder and summary name the id to pass it
	// (expandtool.go).
	ExposeExpandTool bool
	// NoExpandRPC: the model reading the view has no tool that calls
	// ExpandMessage either, so without ExposeExpandTool placeholders and
	// summaries name their id but tell it to call nothing (ExpandByNone).
	// Not a client's option: the engine sets it for the sessions the
	// gateway makes (their gateway label), whose model only has the tools
	// its client sent; an API session keeps the ExpandMessage wording,
	// which docs/api.md tells its runtime to offer as a tool.
	NoExpandRPC bool
	// KeepHumanTokens: human-authored user messages (chat.HumanAuthoredIn)
	// stay verbatim through every tier, the newest first, within this many
	// tokens; older ones beyond it are summarized (the summary's trail
	// names each). Messages with standing instructions
	// (chat.StandingInstructions) are kept whatever their size. Scaffolding
	// a client injects may be pruned and summarized. 0: only the original
	// task and the latest user message are kept. All of it only while the
	// request fits: PlanCompaction plans once more without them rather
	// than fail (ErrTooLarge).
	KeepHumanTokens int64
}

// Overrides is a policy as a client gives it: nil fields take defaults.
type Overrides struct {
	WarningThreshold         *float64
	CriticalThreshold        *float64
	EmergencyThreshold       *float64
	Target                   *float64
	KeepRecentTokens         *int64
	KeepRecentMessages       *int
	ProtectRecentToolResults *int
	AutoCompact              *bool
	ReservedOutputTokens     *int64
	SummaryMaxTokens         *int
	Summarizer               *string
	CachePaybackCalls        *int
	CacheTarget              *float64
	ExposeExpandTool         *bool
	KeepHumanTokens          *int64
}

// Defaults for a model with the given context window (DESIGN.md §5).
func Defaults(window int64) Policy {
	return Policy{
		WarningThreshold:         0.70,
		CriticalThreshold:        0.85,
		EmergencyThreshold:       0.95,
		Target:                   0.50,
		KeepRecentTokens:         window * 30 / 100,
		KeepRecentMessages:       10,
		ProtectRecentToolResults: 3,
		AutoCompact:              true,
		ReservedOutputTokens:     window * 15 / 100,
		SummaryMaxTokens:         800,
		CachePaybackCalls:        DefaultCachePaybackCalls,
		CacheTarget:              DefaultCacheTarget,
		KeepHumanTokens:          (window - window*15/100) / 4,
	}
}

// Defaults of cache-aware compaction (see Plan.PaybackCalls; docs/cost.md,
// "Why these defaults"): a compaction must repay its prompt-cache rewrite
// within 10 calls, which at Anthropic's prices asks it to remove at least
// 1.15 times what it keeps, and compacts down to 0.30 of the usable window.
const (
	DefaultCachePaybackCalls = 10
	DefaultCacheTarget       = 0.30
)

// Resolve fills o's unset fields with the defaults for window and checks
// that the result is coherent. field is the request path of the policy, for
// error messages.
func Resolve(field string, o Overrides, window int64) (Policy, error) {
	p := Defaults(window)
	override(&p.WarningThreshold, o.WarningThreshold)
	override(&p.CriticalThreshold, o.CriticalThreshold)
	override(&p.EmergencyThreshold, o.EmergencyThreshold)
	override(&p.Target, o.Target)
	override(&p.KeepRecentTokens, o.KeepRecentTokens)
	override(&p.KeepRecentMessages, o.KeepRecentMessages)
	override(&p.ProtectRecentToolResults, o.ProtectRecentToolResults)
	override(&p.AutoCompact, o.AutoCompact)
	override(&p.ReservedOutputTokens, o.ReservedOutputTokens)
	override(&p.SummaryMaxTokens, o.SummaryMaxTokens)
	override(&p.Summarizer, o.Summarizer)
	override(&p.CachePaybackCalls, o.CachePaybackCalls)
	override(&p.ExposeExpandTool, o.ExposeExpandTool)
	// A quarter of the usable window, as the policy leaves it.
	p.KeepHumanTokens = max(0, window-p.ReservedOutputTokens) / 4
	override(&p.KeepHumanTokens, o.KeepHumanTokens)
	if o.CacheTarget != nil {
		p.CacheTarget = *o.CacheTarget
	} else {
		p.CacheTarget = min(p.CacheTarget, p.Target)
	}

	var v []chat.Violation
	add := func(name, format string, args ...any) {
		v = append(v, chat.Violation{Field: field + "." + name, Description: fmt.Sprintf(format, args...)})
	}
	if p.CriticalThreshold < p.WarningThreshold {
		add("critical_threshold", "%.2f is below warning_threshold %.2f (unset fields take their defaults)", p.CriticalThreshold, p.WarningThreshold)
	}
	if p.EmergencyThreshold < p.CriticalThreshold {
		add("emergency_threshold", "%.2f is below critical_threshold %.2f (unset fields take their defaults)", p.EmergencyThreshold, p.CriticalThreshold)
	}
	if p.Target >= p.WarningThreshold {
		add("target", "%.2f must be below warning_threshold %.2f (unset fields take their defaults)", p.Target, p.WarningThreshold)
	}
	if p.CachePaybackCalls < 0 {
		add("cache_payback_calls", "%d must be 0 (off) or more", p.CachePaybackCalls)
	}
	if p.CacheTarget <= 0 || p.CacheTarget >= p.WarningThreshold {
		add("cache_target", "%.2f must be above 0 and below warning_threshold %.2f", p.CacheTarget, p.WarningThreshold)
	}
	if p.KeepHumanTokens < 0 {
		add("keep_human_tokens", "%d must be 0 or more", p.KeepHumanTokens)
	}
	if p.ReservedOutputTokens >= window {
		add("reserved_output_tokens", "%d leaves no room in a %d-token window", p.ReservedOutputTokens, window)
	}
	if len(v) > 0 {
		return Policy{}, &chat.InvalidError{Violations: v}
	}
	return p, nil
}

func override[T any](dst, src *T) {
	if src != nil {
		*dst = *src
	}
}

// LevelAt returns the level reached at fraction (used / usable window).
func (p Policy) LevelAt(fraction float64) Level {
	switch {
	case fraction >= p.EmergencyThreshold:
		return LevelHandoff
	case fraction >= p.CriticalThreshold:
		return LevelSummarize
	case fraction >= p.WarningThreshold:
		return LevelCompact
	default:
		return LevelOK
	}
}
