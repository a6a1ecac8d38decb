package gateway

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestMemoBoundsMemory: what the memo accounts for is what it holds, so
// that its bound (memoBytes) bounds its heap: filled through the OpenAI
// chat door's parse (each message as the door memoizes it: parts,
// metadata with its digest and raw form, the memo's own copy and key) up
// to three quarters of a bound, with short, medium and long messages, the
// heap it holds after a collection is at most 1.2 times what it accounts.
// With 256 bytes a message accounted, 40-byte messages held 1.9 times.
func TestMemoBoundsMemory(t *testing.T) {
	const bound = 16 << 20
	for _, size := range []int{40, 400, 4000} {
		t.Run(fmt.Sprintf("%dB", size), func(t *testing.T) {
			m := newMemo(bound)
			d := openAIChat{m}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			text := strings.Repeat("x", size)
			msgs := make([]map[string]any, 64)
			for round := 0; m.size < bound*3/4; round++ {
				for i := range msgs {
					msgs[i] = map[string]any{"role": []string{"user", "assistant"}[i%2], "content": fmt.Sprintf("%d.%d %s", round, i, text)}
				}
				body, _ := json.Marshal(msgs)
				if _, err := d.parse(mustScan(t, `{"model":"gpt-4o","messages":`+string(body)+`}`)); err != nil {
					t.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			ratio := float64(held) / float64(m.size)
			t.Logf("%d-byte messages: the memo accounts %d bytes (bound %d) and holds %d bytes of heap: %.2f times", size, m.size, bound, held, ratio)
			runtime.KeepAlive(m)
			if ratio > 1.2 {
				t.Errorf("the memo holds %.2f times the bytes it accounts for", ratio)
			}
		})
	}
}
