package tokens

import "unicode/utf8"

// The split patterns of tiktoken, written out by hand. Each function returns
// the end of the piece that starts at i (i < len(s)), exactly as a
// leftmost-first backtracking regex engine would match the pattern there. The
// backtracking is resolved analytically, so every piece costs time linear in
// its length.
//
// cl100k_base:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// o200k_base:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+

// decode returns the rune at i, its width and its classes.
func decode(s string, i int) (rune, int, uint8) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClasses[c]
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return r, w, runeClasses.of(r)
}

// scan returns the end of the run of runes from i that have any class in mask.
func scan(s string, i int, mask uint8) int {
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if asciiClasses[c]&mask == 0 {
				return i
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if runeClasses.of(r)&mask == 0 {
			return i
		}
		i += w
	}
	return i
}

// scanOther returns the end of the run from i of runes that are neither
// whitespace, letters nor numbers ([^\s\p{L}\p{N}]).
func scanOther(s string, i int) int {
	const mask = clsSpace | clsLetter | clsNumber
	for i < len(s) {
		_, w, c := decode(s, i)
		if c&mask != 0 {
			return i
		}
		i += w
	}
	return i
}

// contraction returns the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or 0.
// Case-insensitive matching follows Unicode simple case folding, under which
// 's' also matches U+017F LATIN SMALL LETTER LONG S.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return 0
	}
	lower := func(b byte) byte {
		if 'A' <= b && b <= 'Z' {
			return b + ('a' - 'A')
		}
		return b
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(s) && lower(s[i+2]) == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(s) && lower(s[i+2]) == 'l' {
			return 3
		}
	case 0xC5: // U+017F (ſ) folds to 's'.
		if i+2 < len(s) && s[i+2] == 0xBF {
			return 3
		}
	}
	return 0
}

// numberEnd matches \p{N}{1,3} at i (the rune at i is a number).
func numberEnd(s string, i int) int {
	for k := 0; k < 3 && i < len(s); k++ {
		_, w, c := decode(s, i)
		if c&clsNumber == 0 {
			break
		}
		i += w
	}
	return i
}

// spaceEnd matches \s*[\r\n]+|\s+(?!\S)|\s+ at i (the rune at i is
// whitespace).
func spaceEnd(s string, i int) int {
	j := i
	lastNewline := -1
	lastWidth := 0
	for j < len(s) {
		_, w, c := decode(s, j)
		if c&clsSpace == 0 {
			break
		}
		if c&clsNewline != 0 {
			lastNewline = j
		}
		lastWidth = w
		j += w
	}
	if lastNewline >= 0 {
		return lastNewline + 1 // \r and \n are one byte
	}
	if j == len(s) || j-lastWidth == i {
		return j
	}
	return j - lastWidth
}

// pieceCL100K returns the end of the cl100k_base piece starting at i.
func pieceCL100K(s string, i int) int {
	r0, w0, c0 := decode(s, i)
	if r0 == '\'' {
		if n := contraction(s, i); n > 0 {
			return i + n
		}
	}
	if c0&clsLetter != 0 {
		return scan(s, i+w0, clsLetter)
	}
	if c0&(clsNewline|clsNumber) == 0 && i+w0 < len(s) {
		if _, w1, c1 := decode(s, i+w0); c1&clsLetter != 0 {
			return scan(s, i+w0+w1, clsLetter)
		}
	}
	if c0&clsNumber != 0 {
		return numberEnd(s, i)
	}
	if end, ok := otherEnd(s, i, r0, w0, c0, false); ok {
		return end
	}
	return spaceEnd(s, i)
}

// otherEnd matches ` ?[^\s\p{L}\p{N}]+[\r\n]*` (or `[\r\n/]*` at the end for
// o200k_base) at i.
func otherEnd(s string, i int, r0 rune, w0 int, c0 uint8, slash bool) (int, bool) {
	const mask = clsSpace | clsLetter | clsNumber
	j := i
	if r0 == ' ' {
		if i+1 >= len(s) {
			return 0, false
		}
		if _, _, c1 := decode(s, i+1); c1&mask != 0 {
			return 0, false
		}
		j = i + 1
	} else if c0&mask != 0 {
		return 0, false
	}
	j = scanOther(s, j)
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || (slash && s[j] == '/')) {
		j++
	}
	return j, true
}

// pieceO200K returns the end of the o200k_base piece starting at i.
func pieceO200K(s string, i int) int {
	r0, w0, c0 := decode(s, i)
	if end := wordO200K(s, i, w0, c0); end > 0 {
		return end
	}
	if c0&clsNumber != 0 {
		return numberEnd(s, i)
	}
	if end, ok := otherEnd(s, i, r0, w0, c0, true); ok {
		return end
	}
	return spaceEnd(s, i)
}

// wordO200K tries the two letter alternatives of o200k_base at i, in the
// order a backtracking engine does: the first with and without the optional
// prefix, then the second with and without it. It returns 0 when neither
// matches.
func wordO200K(s string, i, w0 int, c0 uint8) int {
	prefix := c0&(clsNewline|clsLetter|clsNumber) == 0
	if prefix && i+w0 < len(s) {
		if end := upperLower(s, i+w0); end > 0 {
			return end
		}
	}
	if c0&(clsUpper|clsLower) != 0 {
		if end := upperLower(s, i); end > 0 {
			return end
		}
	}
	if prefix && i+w0 < len(s) {
		if end := upperThenLower(s, i+w0); end > 0 {
			return end
		}
	}
	if c0&clsUpper != 0 {
		return upperThenLower(s, i)
	}
	return 0
}

// upperLower matches U*W+C? at i (U, W the upper and lower sets, C the
// contractions) and returns its end, or 0.
func upperLower(s string, i int) int {
	j := i
	lastLowerEnd := -1
	for j < len(s) {
		_, w, c := decode(s, j)
		if c&clsUpper == 0 {
			break
		}
		if c&clsLower != 0 {
			lastLowerEnd = j + w
		}
		j += w
	}
	if j < len(s) {
		if _, w, c := decode(s, j); c&clsLower != 0 {
			end := scan(s, j+w, clsLower)
			return end + contraction(s, end)
		}
	}
	if lastLowerEnd < 0 {
		return 0
	}
	// U* gives back runes until W+ can match the last rune that is in both
	// sets; what followed it was upper-only, so W+ ends right after it.
	return lastLowerEnd + contraction(s, lastLowerEnd)
}

// upperThenLower matches U+W*C? at i and returns its end, or 0.
func upperThenLower(s string, i int) int {
	j := scan(s, i, clsUpper)
	if j == i {
		return 0
	}
	end := scan(s, j, clsLower)
	return end + contraction(s, end)
}
