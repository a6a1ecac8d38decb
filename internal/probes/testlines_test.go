package probes_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/probes"
)

// TestTestLinesBounded: TestLines keeps the failing tests first, at most
// max lines, each verbatim; a line longer than probes.MaxURL (a pytest id
// with a long parameter) is left out, not cut, so a placeholder's tests
// stay within 20 such lines (before, 20 ids of 4 KiB made 80 KiB of a
// placeholder meant to replace the output).
func TestTestLinesBounded(t *testing.T) {
	var out strings.Builder
	for i := range 30 {
		fmt.Fprintf(&out, "tests/test_a.py::test_%02d PASSED\n", i)
	}
	out.WriteString("FAILED tests/test_a.py::test_x - assert 1\n")
	for i := range 20 {
		fmt.Fprintf(&out, "tests/test_b.py::test_long[%s%d] PASSED\n", strings.Repeat("x", 4096), i)
	}
	got := probes.TestLines(out.String(), 5)
	want := []string{"FAILED tests/test_a.py::test_x", "tests/test_a.py::test_00 PASSED", "tests/test_a.py::test_01 PASSED", "tests/test_a.py::test_02 PASSED", "tests/test_a.py::test_03 PASSED"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("TestLines = %q, want %q", got, want)
	}
	var long strings.Builder
	for i := range 20 {
		fmt.Fprintf(&long, "tests/test_b.py::test_long[%s%d] PASSED\n", strings.Repeat("x", 1024), i)
	}
	long.WriteString("tests/test_b.py::test_short PASSED\n")
	if got := probes.TestLines(long.String(), 20); len(strings.Join(got, "")) > 20*probes.MaxURL || len(got) != 1 {
		t.Errorf("TestLines kept %d lines, %d bytes of tests, want only the short one", len(got), len(strings.Join(got, "")))
	}
}

// BenchmarkTestLinesThousands: one output naming thousands of tests (a
// whole suite's verbose run, the scan window full).
func BenchmarkTestLinesThousands(b *testing.B) {
	var out strings.Builder
	for i := 0; out.Len() < 64<<10; i++ {
		fmt.Fprintf(&out, "--- PASS: TestX%d (0.00s)\n", i)
	}
	s := out.String()
	b.ReportAllocs()
	for b.Loop() {
		probes.TestLines(s, 20)
	}
}
