package compaction_test

import (
	"errors"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

func ptr[T any](v T) *T { return &v }

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         compaction.Overrides
		badFields []string
	}{
		{name: "defaults", o: compaction.Overrides{}},
		{name: "single threshold", o: compaction.Overrides{WarningThreshold: ptr(0.65), CriticalThreshold: ptr(0.65)}},
		{name: "warning above default critical", o: compaction.Overrides{WarningThreshold: ptr(0.9)},
			badFields: []string{"p.critical_threshold"}},
		{name: "critical above emergency", o: compaction.Overrides{CriticalThreshold: ptr(0.97)},
			badFields: []string{"p.emergency_threshold"}},
		{name: "target at warning", o: compaction.Overrides{Target: ptr(0.7)}, badFields: []string{"p.target"}},
		{name: "reserve fills the window", o: compaction.Overrides{ReservedOutputTokens: ptr(int64(1000))},
			badFields: []string{"p.reserved_output_tokens"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := compaction.Resolve("p", tc.o, 1000)
			var inv *chat.InvalidError
			if len(tc.badFields) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if p.ReservedOutputTokens != 150 || p.KeepRecentTokens != 300 || !p.AutoCompact {
					t.Errorf("defaults not applied: %+v", p)
				}
				return
			}
			if !errors.As(err, &inv) {
				t.Fatalf("want InvalidError, got %v", err)
			}
			var fields []string
			for _, v := range inv.Violations {
				fields = append(fields, v.Field)
			}
			if len(fields) != len(tc.badFields) || fields[0] != tc.badFields[0] {
				t.Errorf("fields %v, want %v", fields, tc.badFields)
			}
		})
	}
}

func TestLevelAt(t *testing.T) {
	p := compaction.Defaults(1000)
	single, err := compaction.Resolve("p", compaction.Overrides{WarningThreshold: ptr(0.65), CriticalThreshold: ptr(0.65)}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		policy   compaction.Policy
		fraction float64
		want     compaction.Level
	}{
		{p, 0, compaction.LevelOK},
		{p, 0.6999, compaction.LevelOK},
		{p, 0.70, compaction.LevelCompact},
		{p, 0.85, compaction.LevelSummarize},
		{p, 0.95, compaction.LevelHandoff},
		{p, 1.7, compaction.LevelHandoff},
		{single, 0.64, compaction.LevelOK},
		{single, 0.65, compaction.LevelSummarize},
	} {
		if got := tc.policy.LevelAt(tc.fraction); got != tc.want {
			t.Errorf("%.4f: %v, want %v", tc.fraction, got, tc.want)
		}
	}
}
