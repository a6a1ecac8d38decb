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

func classify(r rune) uint8 {
	if r < 128 {
		return asciiClasses[r]
	}
	return classifySlow(r)
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
