package tokens

import "testing"

func TestRankTable(t *testing.T) {
	ranks := map[string]int32{"a": 0, "ab": 1, "abcdefg": 2, "abcdefgh": 3, "\x00": 4, "\x00\x00": 5, "zz": 6}
	tab := newRankTable(ranks)
	for k, v := range ranks {
		if got := tab.get(k); got != v {
			t.Errorf("%q: %d, want %d", k, got, v)
		}
	}
	for _, missing := range []string{"b", "abc", "abcdefgi", "\x00\x00\x00", "a\x00"} {
		if got := tab.get(missing); got != noRank {
			t.Errorf("%q: %d, want none", missing, got)
		}
	}
}
