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
	// LedgerEstimated is the part of LedgerCalls whose usage was not the
	// provider's final report but an estimate (a stream that ended
	// before its usage: what it carried, else contextd's own counts).
	// Each such call is added to both rows: LedgerCalls stays the whole
	// bill, and this row says how much of it is estimated.
	LedgerEstimated LedgerKind = "estimated"
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
	// Estimated is the part of Calls that is estimated (LedgerEstimated).
	Estimated LedgerTotals
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

// DecodeIDRuns reverses EncodeIDRuns. The ids of its runs are written
// into one buffer and sliced from one string: a view's worth of ids costs
// a few allocations whatever its length (8 for BenchmarkDecodeIDRuns'
// 1,000 ids: the token and span slices, the buffer, its ends, the string,
// the result, and a parse error an odd id costs), not one per id
// (PrepareContext reads the row every call).
func DecodeIDRuns(s string) []string {
	if s == "" {
		return nil
	}
	type span struct{ from, to int64 } // a run, or from < 0: tok as it is
	toks := strings.Split(s, "\n")
	spans := make([]span, len(toks))
	n, size := 0, 0
	for i, tok := range toks {
		first, last, isRun := strings.Cut(tok, "..")
		from, ok := logPosition(first)
		to, err := strconv.ParseInt(last, 10, 64)
		if !isRun || !ok || err != nil || to < from {
			spans[i] = span{from: -1}
			n++
			continue
		}
		spans[i] = span{from, to}
		n += int(to - from + 1)
		size += int(to-from+1) * (len("msg_") + len(last))
	}
	buf := make([]byte, 0, size)
	ends := make([]int, 0, n)
	for _, sp := range spans {
		for k := sp.from; sp.from > 0 && k <= sp.to; k++ {
			buf = strconv.AppendInt(append(buf, "msg_"...), k, 10)
			ends = append(ends, len(buf))
		}
	}
	all := string(buf)
	out := make([]string, 0, n)
	at, e := 0, 0
	for i, sp := range spans {
		if sp.from < 0 {
			out = append(out, toks[i])
			continue
		}
		for k := sp.from; k <= sp.to; k++ {
			out = append(out, all[at:ends[e]])
			at = ends[e]
			e++
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
