package contextctl

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// breakdown builds a gpt-4o-like window (128,000, 19,200 reserved) at a
// given share of messages.
func breakdown(messages int64) Breakdown {
	b := Breakdown{Model: "gpt-4o", Window: 128_000, System: 1_200, Tools: 3_400, Messages: messages, Reserved: 19_200,
		Warning: 0.70, Critical: 0.85, Emergency: 0.95, Source: "estimated"}
	b.Used = b.System + b.Tools + b.Messages
	usable := b.Window - b.Reserved
	if b.Used > usable {
		b.Over = b.Used - usable
	} else {
		b.Free = usable - b.Used
	}
	b.PercentUsed = 100 * float64(b.Used) / float64(usable)
	switch f := b.PercentUsed / 100; {
	case f >= b.Emergency:
		b.Level = "HANDOFF"
	case f >= b.Critical:
		b.Level = "SUMMARIZE"
	case f >= b.Warning:
		b.Level = "COMPACT"
	default:
		b.Level = "OK"
	}
	return b
}

func TestRenderGolden(t *testing.T) {
	zero := breakdown(0)
	zero.System, zero.Tools, zero.Used, zero.Free, zero.PercentUsed = 0, 0, 0, 108_800, 0
	single := breakdown(66_120) // 65 % with "summarize at 65 %": warning = critical = 0.65
	single.Warning, single.Critical, single.Level = 0.65, 0.65, "SUMMARIZE"
	calibrated := breakdown(60_000)
	calibrated.Source, calibrated.ExpectedError, calibrated.Model = "calibrated", 0.02, "claude-sonnet-4-5"
	for _, tc := range []struct {
		name  string
		b     Breakdown
		width int
		color bool
	}{
		{"empty_0pct", zero, 80, false},
		{"light_14pct", breakdown(10_632), 80, false}, // 15,232 of 108,800
		{"summarize_65pct", single, 80, false},
		{"full_100pct", breakdown(104_200), 80, false},
		{"over_110pct", breakdown(115_000), 80, false},
		{"calibrated_wide", calibrated, 120, false},
		{"color_14pct", breakdown(10_632), 80, true},
		{"narrow_40cols", breakdown(66_120), 40, false},
		{"narrow_over_30cols", breakdown(115_000), 30, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Render(tc.b, tc.width, tc.color)
			path := filepath.Join("testdata", "bar_"+tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/contextctl -update)", err)
			}
			if got != string(want) {
				t.Errorf("rendering changed:\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestBarAddsUp: the bar has exactly the cells asked for at every width and
// fill, so it never wraps or jitters.
func TestBarAddsUp(t *testing.T) {
	for width := 10; width <= 200; width += 7 {
		for _, m := range []int64{0, 1, 500, 40_000, 104_200, 115_000, 500_000} {
			line := barLine(breakdown(m), width, func(_, s string) string { return s })
			if n := len([]rune(line)); n != width+2 {
				t.Fatalf("width %d, messages %d: %d runes: %s", width, m, n, line)
			}
		}
	}
}
