package engine

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/tokens"
)

// TestRelayedOutputCountLimits: the relayed text of a cut stream is
// tokenized as every other text is, within the count limits: at most
// MaxCountBytes of it (the rest a token per 4 bytes), and only with its
// share of the server-wide count budget (taken: a token per 4 bytes, the
// report still recorded). It was tokenized whole (up to 16 MiB, twice
// CONTEXTD_MAX_COUNT_BYTES) outside the budget, so any number of cut
// streams tokenized at once.
func TestRelayedOutputCountLimits(t *testing.T) {
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	relayed := strings.Repeat(" a", 2000) // 4,000 bytes, 2,000 tokens
	in := ReportInput{Estimated: true, RelayedText: relayed}
	exact := New(tokens.NewEncodings(), models, nil).relayedOutput(t.Context(), "gpt-4o", in).OutputTokens
	if exact < 1900 || exact > 2100 {
		t.Fatalf("unbounded: %d tokens, want about 2000", exact)
	}

	// At most MaxCountBytes tokenized.
	e := New(tokens.NewEncodings(), models, nil, WithLimits(Limits{MaxCountBytes: 1000}))
	if got := e.relayedOutput(t.Context(), "gpt-4o", in).OutputTokens; got < 1200 || got > 1300 {
		t.Errorf("past MaxCountBytes: %d tokens, want about 500 counted + 3000/4", got)
	}

	// Only with the budget: taken, nothing is tokenized.
	e = New(tokens.NewEncodings(), models, nil, WithLimits(Limits{MaxCountBytes: 4000, CountBudgetBytes: 4000, LargeCountBytes: 100}))
	hold, err := e.admitCount(t.Context(), tokens.DefaultFraming, strings.Repeat("x", 4000), "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !e.counting.waiting.TryAcquire(4000) { // the queue full too
		t.Fatal("the budget's queue is not free")
	}
	got := e.relayedOutput(t.Context(), "gpt-4o", in)
	if got.OutputTokens != int64(len(relayed)/4) || got.RelayedText != "" {
		t.Errorf("with the budget taken: %d tokens (text left %d bytes), want a token per 4 bytes, %d", got.OutputTokens, len(got.RelayedText), len(relayed)/4)
	}
	e.counting.waiting.Release(4000)
	hold()
	if got := e.relayedOutput(t.Context(), "gpt-4o", in).OutputTokens; got != exact {
		t.Errorf("with the budget free: %d tokens, want %d", got, exact)
	}
}
