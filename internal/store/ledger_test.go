package store

import (
	"reflect"
	"strconv"
	"testing"
)

func TestIDRuns(t *testing.T) {
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{nil, ""},
		{[]string{"msg_1"}, "msg_1"},
		{[]string{"msg_1", "msg_2", "msg_3"}, "msg_1..3"},
		{[]string{"msg_1", "sum_3_1", "msg_40", "msg_41", "ph_3_2", "msg_43", "msg_44"}, "msg_1\nsum_3_1\nmsg_40..41\nph_3_2\nmsg_43..44"},
		{[]string{"msg_3", "msg_2", "msg_01", "msg_02", "x..5", "msg_"}, "msg_3\nmsg_2\nmsg_01\nmsg_02\nx..5\nmsg_"},
	} {
		got := EncodeIDRuns(tc.ids)
		if got != tc.want {
			t.Errorf("EncodeIDRuns(%q) = %q, want %q", tc.ids, got, tc.want)
		}
		if back := DecodeIDRuns(got); !reflect.DeepEqual(back, tc.ids) {
			t.Errorf("DecodeIDRuns(%q) = %q, want %q", got, back, tc.ids)
		}
	}
}

// BenchmarkDecodeIDRuns: the cache-hints row of a 1,000-message view
// (one run and a few odd ids), read by every PrepareContext.
func BenchmarkDecodeIDRuns(b *testing.B) {
	ids := []string{"sum_1"}
	for n := 1; n <= 1000; n++ {
		ids = append(ids, "msg_"+strconv.Itoa(n))
	}
	enc := EncodeIDRuns(append(ids, "x"))
	b.ReportAllocs()
	for b.Loop() {
		DecodeIDRuns(enc)
	}
}
