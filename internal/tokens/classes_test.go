package tokens

import (
	"testing"
	"unicode"
)

// TestRuneClasses checks the pre-tokenizer's rune table against the Unicode
// predicates it stands for, on every rune.
func TestRuneClasses(t *testing.T) {
	bad := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got, want := runeClasses.of(r), classifySlow(r); got != want {
			bad++
			if bad <= 10 {
				t.Errorf("U+%04X: classes %08b, want %08b", r, got, want)
			}
		}
	}
	if got := runeClasses.of(unicode.MaxRune + 1); got != 0 {
		t.Errorf("past the last rune: classes %08b", got)
	}
}
