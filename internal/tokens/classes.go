package tokens

import "unicode"

// Character classes used by the split patterns. A rune may be in several.
const (
	clsLetter  uint8 = 1 << iota // \p{L}
	clsNumber                    // \p{N}
	clsSpace                     // \s (Unicode White_Space)
	clsNewline                   // \r or \n
	clsUpper                     // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (o200k)
	clsLower                     // [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k)
)

// asciiClasses is built once by a pure function; it is never written after.
var asciiClasses = buildASCIIClasses()

func buildASCIIClasses() [128]uint8 {
	var t [128]uint8
	for r := rune(0); r < 128; r++ {
		t[r] = classifySlow(r)
	}
	return t
}

// runeClasses holds the classes of every rune, so that the pre-tokenizer
// reads one table instead of searching four Unicode tables per rune (which
// made long runs of emoji or CJK slow). Built once by a pure function; never
// written after.
var runeClasses = buildRuneClasses()

// classTable maps a rune to its classes through pages of 256 runes; pages
// with no class share page 0. It takes about 200 KB.
type classTable struct {
	page  [(unicode.MaxRune + 1) >> 8]uint16
	pages [][256]uint8
}

func (t *classTable) of(r rune) uint8 {
	if uint32(r) > unicode.MaxRune {
		return 0
	}
	return t.pages[t.page[r>>8]][r&0xff]
}

func (t *classTable) add(r rune, c uint8) {
	if t.page[r>>8] == 0 {
		t.pages = append(t.pages, [256]uint8{})
		t.page[r>>8] = uint16(len(t.pages) - 1)
	}
	t.pages[t.page[r>>8]][r&0xff] |= c
}

// buildRuneClasses sets the same classes as classifySlow (the general
// categories are disjoint, so their order does not matter);
// TestRuneClasses compares the two on every rune.
func buildRuneClasses() *classTable {
	t := &classTable{pages: make([][256]uint8, 1, 1024)}
	set := func(tab *unicode.RangeTable, c uint8) {
		for _, r := range tab.R16 {
			for x := rune(r.Lo); x <= rune(r.Hi); x += rune(r.Stride) {
				t.add(x, c)
			}
		}
		for _, r := range tab.R32 {
			for x := rune(r.Lo); x <= rune(r.Hi); x += rune(r.Stride) {
				t.add(x, c)
			}
		}
	}
	set(unicode.Lu, clsLetter|clsUpper)
	set(unicode.Lt, clsLetter|clsUpper)
	set(unicode.Ll, clsLetter|clsLower)
	set(unicode.Lm, clsLetter|clsUpper|clsLower)
	set(unicode.Lo, clsLetter|clsUpper|clsLower)
	set(unicode.M, clsUpper|clsLower)
	set(unicode.N, clsNumber)
	set(unicode.White_Space, clsSpace)
	t.add('\r', clsNewline)
	t.add('\n', clsNewline)
	return t
}

func classifySlow(r rune) uint8 {
	var c uint8
	switch {
	case unicode.IsLetter(r):
		c |= clsLetter
		switch {
		case unicode.Is(unicode.Lu, r) || unicode.Is(unicode.Lt, r):
			c |= clsUpper
		case unicode.Is(unicode.Ll, r):
			c |= clsLower
		default: // Lm, Lo
			c |= clsUpper | clsLower
		}
	case unicode.IsMark(r):
		c |= clsUpper | clsLower
	case unicode.IsNumber(r):
		c |= clsNumber
	case unicode.IsSpace(r):
		c |= clsSpace
		if r == '\r' || r == '\n' {
			c |= clsNewline
		}
	}
	return c
}
