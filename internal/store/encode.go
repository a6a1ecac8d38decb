package store

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// Backends keep structured fields as JSON text. These helpers are the one
// encoding both use, so a row written by one reads the same in the other.

// EncodeJSON marshals v, writing nil maps as "{}" and nil slices as "[]".
func EncodeJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	if string(b) == "null" {
		if reflect.ValueOf(v).Kind() == reflect.Slice {
			return "[]", nil
		}
		return "{}", nil
	}
	return string(b), nil
}

// DecodeJSON unmarshals text into v.
func DecodeJSON(text string, v any) error {
	if text == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(text), v); err != nil {
		return fmt.Errorf("decode stored JSON: %w", err)
	}
	return nil
}

// policyJSON is the stored form of compaction.Overrides.
type policyJSON struct {
	WarningThreshold         *float64 `json:"warning_threshold,omitempty"`
	CriticalThreshold        *float64 `json:"critical_threshold,omitempty"`
	EmergencyThreshold       *float64 `json:"emergency_threshold,omitempty"`
	Target                   *float64 `json:"target,omitempty"`
	KeepRecentTokens         *int64   `json:"keep_recent_tokens,omitempty"`
	KeepRecentMessages       *int     `json:"keep_recent_messages,omitempty"`
	ProtectRecentToolResults *int     `json:"protect_recent_tool_results,omitempty"`
	AutoCompact              *bool    `json:"auto_compact,omitempty"`
	ReservedOutputTokens     *int64   `json:"reserved_output_tokens,omitempty"`
	SummaryMaxTokens         *int     `json:"summary_max_tokens,omitempty"`
	Summarizer               *string  `json:"summarizer,omitempty"`
	CachePaybackCalls        *int     `json:"cache_payback_calls,omitempty"`
	CacheTarget              *float64 `json:"cache_target,omitempty"`
	ExposeExpandTool         *bool    `json:"expose_expand_tool,omitempty"`
	KeepHumanTokens          *int64   `json:"keep_human_tokens,omitempty"`
}

// EncodePolicy returns the stored form of a policy.
func EncodePolicy(o compaction.Overrides) (string, error) {
	return EncodeJSON(policyJSON(o))
}

// DecodePolicy reads a stored policy.
func DecodePolicy(text string) (compaction.Overrides, error) {
	var p policyJSON
	err := DecodeJSON(text, &p)
	return compaction.Overrides(p), err
}

// DecodeStringMap reads a stored map; an empty map reads as nil, as it was
// before it was stored.
func DecodeStringMap(text string) (map[string]string, error) {
	var m map[string]string
	if err := DecodeJSON(text, &m); err != nil || len(m) == 0 {
		return nil, err
	}
	return m, nil
}

// SessionJSON is the stored text of a session's structured fields.
type SessionJSON struct {
	Tools, Policy, Labels string
}

// EncodeSession returns the stored text of s's structured fields.
func EncodeSession(s *Session) (SessionJSON, error) {
	var j SessionJSON
	var err error
	if j.Tools, err = encodeTools(s.Tools); err != nil {
		return j, err
	}
	if j.Policy, err = EncodePolicy(s.Policy); err != nil {
		return j, err
	}
	j.Labels, err = EncodeJSON(s.Labels)
	return j, err
}

// DecodeInto sets s's structured fields from their stored text.
func (j SessionJSON) DecodeInto(s *Session) error {
	var err error
	if s.Tools, err = decodeTools(j.Tools); err != nil {
		return err
	}
	if s.Labels, err = DecodeStringMap(j.Labels); err != nil {
		return err
	}
	s.Policy, err = DecodePolicy(j.Policy)
	return err
}

// CompactionJSON is the stored text of a compaction's structured fields.
type CompactionJSON struct {
	Tiers, Items, ViewBefore, ViewAfter string
}

// EncodeCompaction returns the stored text of c's structured fields.
func EncodeCompaction(c *Compaction) (CompactionJSON, error) {
	var j CompactionJSON
	var err error
	for _, f := range []struct {
		dst *string
		v   any
	}{{&j.Tiers, c.Tiers}, {&j.Items, c.Items}, {&j.ViewBefore, c.ViewBefore}, {&j.ViewAfter, c.ViewAfter}} {
		if *f.dst, err = EncodeJSON(f.v); err != nil {
			return j, err
		}
	}
	return j, nil
}

// DecodeInto sets c's structured fields from their stored text.
func (j CompactionJSON) DecodeInto(c *Compaction) error {
	for _, f := range []struct {
		text string
		dst  any
	}{{j.Tiers, &c.Tiers}, {j.Items, &c.Items}, {j.ViewBefore, &c.ViewBefore}, {j.ViewAfter, &c.ViewAfter}} {
		if err := DecodeJSON(f.text, f.dst); err != nil {
			return err
		}
	}
	return nil
}

// EncodeIDs stores a list of message ids ("[]" when empty).
func EncodeIDs(ids []string) (string, error) {
	if len(ids) == 0 {
		return "[]", nil
	}
	return EncodeJSON(ids)
}

// DecodeIDs reads a stored list of message ids (nil when empty).
func DecodeIDs(text string) ([]string, error) {
	var ids []string
	if err := DecodeJSON(text, &ids); err != nil || len(ids) == 0 {
		return nil, err
	}
	return ids, nil
}

// OrderByIDs returns msgs in the order of ids; a missing id is ErrNotFound.
func OrderByIDs(msgs []chat.Message, ids []string) ([]chat.Message, error) {
	byID := make(map[string]chat.Message, len(msgs))
	for _, m := range msgs {
		byID[m.ID] = m
	}
	out := make([]chat.Message, len(ids))
	for i, id := range ids {
		m, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("message %q: %w", id, ErrNotFound)
		}
		out[i] = m
	}
	return out, nil
}
