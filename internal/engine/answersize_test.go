package engine_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// TestCachedAnswerSizeIsExact: the answer size of a cached view is summed
// once and extended by each append (preparesize.go), also by messages
// another replica appended, and it refuses a growing view at exactly the
// call an engine without a view cache (which sizes every message every
// call) refuses it: two sessions of the same messages, one per engine,
// grown a message at a time past a 64 KB cap, every other message of the
// cached one appended by a second replica.
func TestCachedAnswerSizeIsExact(t *testing.T) {
	models, encodings := testModels(t)
	backendStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		limits := engine.WithLimits(engine.Limits{MaxResponseBytes: 64 << 10})
		cached := engine.New(encodings, models, st, limits)
		uncached := engine.New(encodings, models, st, limits, engine.WithViewCacheBytes(0))
		replica := engine.New(encodings, models, st, limits)
		off := false
		var ids []string
		for range 2 {
			v, err := cached.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o", Policy: compaction.Overrides{AutoCompact: &off}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, v.ID)
		}
		refusedAt := []int{-1, -1}
		for call := 0; call < 40 && (refusedAt[0] < 0 || refusedAt[1] < 0); call++ {
			// 1.9–2.3 KB a message, with characters JSON escapes.
			msg := userMsg(fmt.Sprintf("%d \"quoted\"\n", call) + strings.Repeat("a\tb ", 450+call*13))
			for i, e := range []*engine.Engine{cached, uncached} {
				if refusedAt[i] >= 0 {
					continue
				}
				appender := e
				if i == 0 && call%2 == 1 {
					appender = replica
				}
				_, err := appender.PrepareContext(ctx, tenant, ids[i], engine.PrepareInput{Messages: []chat.Message{msg}})
				switch {
				case errors.Is(err, engine.ErrResourceExhausted):
					refusedAt[i] = call
				case err != nil:
					t.Fatal(err)
				}
				// A call with nothing new is sized from the cache alone.
				if _, err := e.PrepareContext(ctx, tenant, ids[i], engine.PrepareInput{}); err != nil && refusedAt[i] < 0 {
					t.Fatalf("call %d, nothing new: %v", call, err)
				}
			}
		}
		if refusedAt[0] < 0 || refusedAt[0] != refusedAt[1] {
			t.Errorf("with the view cache the view was refused at call %d, without it at call %d", refusedAt[0], refusedAt[1])
		}
	})
}
