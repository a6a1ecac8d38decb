package store

import (
	"strconv"
	"strings"
)

// LedgerKind separates the agent's own model calls from compaction
// overhead (the summarizer's LLM calls).
type LedgerKind string

// Ledger kinds.
const (
	LedgerCalls    LedgerKind = "calls"
	LedgerOverhead LedgerKind = "overhead"
)

// LedgerCap is where every ledger total saturates (both stores add with
// MIN/LEAST against it), far below int64's limit: one call adds at most
// 10^8 tokens per kind and $1M, so a sum can never overflow.
const LedgerCap int64 = 4_000_000_000_000_000_000

// LedgerTotals are token and spend totals of a set of model calls. Spend is
// kept in nano-USD so that concurrent increments add up exactly.
type LedgerTotals struct {
	Calls       int64
	Input       int64 // uncached input
	CacheRead   int64
	CacheWrite  int64
	Output      int64
	CostNanoUSD int64
	// Unpriced counts calls whose model had no prices.
	Unpriced int64
}

// Add returns t plus o.
func (t LedgerTotals) Add(o LedgerTotals) LedgerTotals {
	return LedgerTotals{Calls: t.Calls + o.Calls, Input: t.Input + o.Input, CacheRead: t.CacheRead + o.CacheRead,
		CacheWrite: t.CacheWrite + o.CacheWrite, Output: t.Output + o.Output,
		CostNanoUSD: t.CostNanoUSD + o.CostNanoUSD, Unpriced: t.Unpriced + o.Unpriced}
}

// Ledger is what a session has cost.
type Ledger struct {
	Calls    LedgerTotals
	Overhead LedgerTotals
}

// PreparedView is what a session's latest PrepareContext returned: a digest
// of what precedes the messages (model, system prompt, tools), the ids of
// the messages, in order, and the view token it returned ("" if none).
type PreparedView struct {
	Fixed     string
	IDs       []string
	ViewToken string
}

// EncodeIDRuns writes ids compactly: a run of consecutive log messages
// (msg_7, msg_8, ..., msg_40) becomes "msg_7..40", so a view costs a few
// bytes per compaction rather than per message.
func EncodeIDRuns(ids []string) string {
	var b strings.Builder
	for i := 0; i < len(ids); {
		n, ok := logPosition(ids[i])
		j := i + 1
		for ok && j < len(ids) {
			m, ok2 := logPosition(ids[j])
			if !ok2 || m != n+int64(j-i) {
				break
			}
			j++
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(ids[i])
		if j-i > 1 {
			b.WriteString(".." + strconv.FormatInt(n+int64(j-i-1), 10))
		}
		i = j
	}
	return b.String()
}

// DecodeIDRuns reverses EncodeIDRuns.
func DecodeIDRuns(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, tok := range strings.Split(s, "\n") {
		first, last, isRun := strings.Cut(tok, "..")
		from, ok := logPosition(first)
		to, err := strconv.ParseInt(last, 10, 64)
		if !isRun || !ok || err != nil || to < from {
			out = append(out, tok)
			continue
		}
		for n := from; n <= to; n++ {
			out = append(out, "msg_"+strconv.FormatInt(n, 10))
		}
	}
	return out
}

// logPosition parses the id of a log message, "msg_N".
func logPosition(id string) (int64, bool) {
	num, ok := strings.CutPrefix(id, "msg_")
	if !ok || num == "" || num[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	return n, err == nil && n > 0
}
