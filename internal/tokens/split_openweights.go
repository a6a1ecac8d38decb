package tokens

import (
	"unicode"
	"unicode/utf8"
)

// Pre-tokenizers of the open-weight families, written out by hand like
// split.go: each returns the end of the piece that starts at i, as the
// tokenizer.json's Split steps (leftmost-first regex, "Isolated") would cut
// it, in time linear in the piece.
//
// Llama 3 uses cl100k_base's pattern unchanged (pieceCL100K).
//
// Qwen 2 / 2.5 / 3 (after NFC normalization):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+

// pieceQwen2 returns the end of the Qwen 2 piece starting at i: cl100k_base's
// pattern with one number per piece instead of up to three.
func pieceQwen2(s string, i int) int {
	if _, w, c := decode(s, i); c&clsNumber != 0 {
		return i + w
	}
	return pieceCL100K(s, i)
}

// DeepSeek V3 / R1 apply three Split steps in sequence, each to the pieces
// of the one before:
//
//  1. \p{N}{1,3}
//  2. [一-龥぀-ゟ゠-ヿ]+ (CJK ideographs U+4E00–U+9FA5, hiragana, katakana)
//  3. [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//     | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// "Isolated" keeps the text between matches as pieces of its own. Steps 1 and
// 2 cut the text into segments; step 3 runs inside each, so a number or a
// CJK rune ends step 3's input there (for (?!\S) as for every run).

// DeepSeek character classes; a rune may be in several.
const (
	dsLetter      uint16 = 1 << iota // \p{L}
	dsMark                           // \p{M}
	dsPunctSym                       // \p{P} or \p{S}
	dsSpace                          // \s (ECMAScript: White_Space plus U+FEFF, without U+0085)
	dsNewline                        // \r or \n
	dsNumber                         // \p{N}: step 1
	dsCJK                            // step 2's set
	dsASCIIPunct                     // the first set of step 3's first alternative
	dsASCIILetter                    // [A-Za-z]
)

// dsBoundary marks runes that end a step-3 segment.
const dsBoundary = dsNumber | dsCJK

var dsASCII = buildDSASCII()

func buildDSASCII() [128]uint16 {
	var t [128]uint16
	for r := rune(0); r < 128; r++ {
		t[r] = dsClassifySlow(r)
	}
	return t
}

func dsClassifySlow(r rune) uint16 {
	var c uint16
	switch {
	case unicode.IsLetter(r):
		c |= dsLetter
	case unicode.IsMark(r):
		c |= dsMark
	case unicode.IsPunct(r) || unicode.IsSymbol(r):
		c |= dsPunctSym
	case unicode.IsNumber(r):
		c |= dsNumber
	}
	if unicode.IsSpace(r) {
		c |= dsSpace
	}
	if r == '\r' || r == '\n' {
		c |= dsNewline
	}
	if (0x4E00 <= r && r <= 0x9FA5) || (0x3040 <= r && r <= 0x30FF) {
		c |= dsCJK
	}
	if r < 128 && c&dsPunctSym != 0 {
		c |= dsASCIIPunct
	}
	if ('A' <= r && r <= 'Z') || ('a' <= r && r <= 'z') {
		c |= dsASCIILetter
	}
	return c
}

// dsDecode returns the width and classes of the rune at i (0, 0 at the end).
func dsDecode(s string, i int) (int, uint16) {
	if i >= len(s) {
		return 0, 0
	}
	if b := s[i]; b < utf8.RuneSelf {
		return 1, dsASCII[b]
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return w, dsClassifySlow(r)
}

// dsScan returns the end of the run from i of runes with a class in mask and
// none in stop.
func dsScan(s string, i int, mask, stop uint16) int {
	for i < len(s) {
		w, c := dsDecode(s, i)
		if c&mask == 0 || c&stop != 0 {
			return i
		}
		i += w
	}
	return i
}

// pieceDeepSeekV3 returns the end of the DeepSeek V3 piece starting at i.
func pieceDeepSeekV3(s string, i int) int {
	w0, c0 := dsDecode(s, i)
	switch {
	case c0&dsNumber != 0: // step 1: up to three numbers
		j := i + w0
		for k := 1; k < 3; k++ {
			w, c := dsDecode(s, j)
			if c&dsNumber == 0 {
				break
			}
			j += w
		}
		return j
	case c0&dsCJK != 0: // step 2
		return dsScan(s, i+w0, dsCJK, 0)
	}
	if end := dsMatch(s, i, w0, c0); end > 0 {
		return end
	}
	// No alternative matches here: the piece runs to where one does, or to
	// the segment's end.
	j := i + w0
	for j < len(s) {
		w, c := dsDecode(s, j)
		if c&dsBoundary != 0 || dsStarts(s, j, w, c) {
			break
		}
		j += w
	}
	return j
}

// dsStarts reports whether step 3 has a match starting at j.
func dsStarts(s string, j, w int, c uint16) bool {
	if c&(dsLetter|dsMark|dsPunctSym|dsSpace) != 0 {
		return true
	}
	_, c1 := dsDecode(s, j+w)
	return c1&(dsLetter|dsMark) != 0 && c1&dsBoundary == 0
}

// dsMatch returns the end of step 3's match at i, or 0 if none starts there.
// The rune at i is not a boundary.
func dsMatch(s string, i, w0 int, c0 uint16) int {
	w1, c1 := dsDecode(s, i+w0)
	if c1&dsBoundary != 0 {
		w1, c1 = 0, 0 // the segment ends at i+w0
	}
	const letters = dsLetter | dsMark
	switch {
	case c0&dsASCIIPunct != 0 && c1&dsASCIILetter != 0:
		return dsScan(s, i+w0, dsASCIILetter, 0)
	case c0&letters != 0:
		return dsScan(s, i+w0, letters, dsBoundary)
	case c0&(dsNewline|dsPunctSym) == 0 && c1&letters != 0:
		return dsScan(s, i+w0+w1, letters, dsBoundary)
	}
	j := -1
	if s[i] == ' ' && c1&dsPunctSym != 0 {
		j = i + 1
	} else if c0&dsPunctSym != 0 {
		j = i
	}
	if j >= 0 {
		j = dsScan(s, j, dsPunctSym, 0)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	if c0&dsSpace == 0 {
		return 0
	}
	// \s*[\r\n]+|\s+(?!\S)|\s+
	j = i
	lastNewline, lastWidth := -1, 0
	for j < len(s) {
		w, c := dsDecode(s, j)
		if c&dsSpace == 0 {
			break
		}
		if c&dsNewline != 0 {
			lastNewline = j
		}
		lastWidth = w
		j += w
	}
	if lastNewline >= 0 {
		return lastNewline + 1
	}
	if _, c := dsDecode(s, j); j == len(s) || c&dsBoundary != 0 || j-lastWidth == i {
		return j
	}
	return j - lastWidth
}
