package tokens

import "math/bits"

// maxPacked is the longest byte string that packs into a uint64 key.
const maxPacked = 7

// rankTable looks up ranks. Byte strings of up to 7 bytes (most BPE pairs)
// are packed into a uint64 and found in an open-addressing table, which is
// several times faster than hashing and comparing strings; longer ones go to
// a map.
type rankTable struct {
	keys  []uint64
	vals  []int32
	shift uint
	long  map[string]int32
}

// pack returns the key of b (len(b) <= maxPacked): its bytes and its length
// in the top byte, so no key is 0 (the empty slot).
func pack(b string) uint64 {
	var k uint64
	for i := 0; i < len(b); i++ {
		k |= uint64(b[i]) << (8 * i)
	}
	return k | uint64(len(b))<<56
}

func newRankTable(ranks map[string]int32) *rankTable {
	short := 0
	for k := range ranks {
		if len(k) <= maxPacked {
			short++
		}
	}
	size := 1 << bits.Len(uint(short*2)) // load factor at most 1/2
	t := &rankTable{
		keys:  make([]uint64, size),
		vals:  make([]int32, size),
		shift: uint(64 - bits.TrailingZeros(uint(size))),
		long:  make(map[string]int32, len(ranks)-short),
	}
	for k, v := range ranks {
		if len(k) > maxPacked {
			t.long[k] = v
			continue
		}
		key := pack(k)
		for i := t.slot(key); ; i = (i + 1) & (len(t.keys) - 1) {
			if t.keys[i] == 0 {
				t.keys[i], t.vals[i] = key, v
				break
			}
		}
	}
	return t
}

func (t *rankTable) slot(key uint64) int {
	return int((key * 0x9E3779B97F4A7C15) >> t.shift)
}

// get returns the rank of b, or noRank.
func (t *rankTable) get(b string) int32 {
	if len(b) > maxPacked {
		if r, ok := t.long[b]; ok {
			return r
		}
		return noRank
	}
	return t.getPacked(pack(b))
}

// getPacked returns the rank of a packed key, or noRank.
func (t *rankTable) getPacked(key uint64) int32 {
	for i := t.slot(key); ; i = (i + 1) & (len(t.keys) - 1) {
		switch t.keys[i] {
		case key:
			return t.vals[i]
		case 0:
			return noRank
		}
	}
}
