package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The per-session model the linearizability checker (porcupine) holds the
// API agents' operations to. A session is its log, the keys of its
// messages in order, and where its last clear left the view:
//   - append (PrepareContext with messages) adds keys to the log and
//     returns the active view: its normal messages are a subsequence of
//     the log since the last clear, ending with the last key appended
//     (summaries stand in for older ones; a revert brings them back);
//   - clear (ClearMessages) starts the view afresh at the log's end;
//   - read (GetMessages of the log) returns the log exactly.
//
// An operation whose outcome the client never learnt (every retry failed)
// returns "unknown" at the end of time: it may or may not have happened.

type opKind int

const (
	opAppend opKind = iota
	opClear
	opRead
)

type opInput struct {
	session string
	kind    opKind
	keys    []string // appended
}

type opOutput struct {
	unknown bool
	keys    []string // append: the view's normal messages; read: the log
}

// logState is comparable, so porcupine's default equality works.
type logState struct {
	log     string // keys joined by \x00
	n       int
	cleared int
}

func (s logState) keys() []string {
	if s.n == 0 {
		return nil
	}
	return strings.Split(s.log, "\x00")
}

func (s logState) with(keys []string) logState {
	all := append(s.keys(), keys...)
	return logState{log: strings.Join(all, "\x00"), n: len(all), cleared: s.cleared}
}

var sessionModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			s := op.Input.(opInput).session
			if _, ok := by[s]; !ok {
				order = append(order, s)
			}
			by[s] = append(by[s], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, s := range order {
			out = append(out, by[s])
		}
		return out
	},
	Init: func() any { return logState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(logState), input.(opInput), output.(opOutput)
		switch in.kind {
		case opAppend:
			next := s.with(in.keys)
			if out.unknown {
				return true, next
			}
			log := next.keys()
			if len(in.keys) > 0 && (len(out.keys) == 0 || out.keys[len(out.keys)-1] != log[len(log)-1]) {
				return false, s
			}
			return isSubsequence(out.keys, log[next.cleared:]), next
		case opClear:
			return true, logState{log: s.log, n: s.n, cleared: s.n}
		default:
			return out.unknown || slices.Equal(out.keys, s.keys()), s
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(opInput), output.(opOutput)
		res := strings.Join(out.keys, ",")
		if out.unknown {
			res = "?"
		}
		return fmt.Sprintf("%v(%s) → %s", [...]string{"append", "clear", "read"}[in.kind], strings.Join(in.keys, ","), res)
	},
}

func isSubsequence(sub, of []string) bool {
	i := 0
	for _, k := range of {
		if i < len(sub) && sub[i] == k {
			i++
		}
	}
	return i == len(sub)
}

// history records the acknowledged operations of the API agents' sessions.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	late  int64
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() int64 { return int64(time.Since(h.start)) }

// add records an operation called at call; unknown outcomes return at the
// end of time.
func (h *history) add(in opInput, call int64, out opOutput) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ret := h.now()
	if out.unknown {
		h.late++
		ret = math.MaxInt64/2 + h.late
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: 0, Input: in, Call: call, Output: out, Return: ret})
}

// check runs porcupine over every session; it returns the sessions whose
// history is not linearizable (with the offending operations described)
// and those the checker could not decide within timeout (not proven
// linearizable: the run counts them as failures too).
func (h *history) check(timeout time.Duration) (bad, undecided []string) {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	for _, part := range sessionModel.Partition(ops) {
		res := porcupine.CheckOperationsTimeout(porcupine.Model{Init: sessionModel.Init, Step: sessionModel.Step}, part, timeout)
		switch res {
		case porcupine.Illegal:
			session := part[0].Input.(opInput).session
			var lines []string
			for _, op := range part[max(0, len(part)-6):] {
				lines = append(lines, sessionModel.DescribeOperation(op.Input, op.Output))
			}
			bad = append(bad, fmt.Sprintf("session %s: %d operations not linearizable (last: %s)", session, len(part), strings.Join(lines, "; ")))
		case porcupine.Unknown:
			undecided = append(undecided, fmt.Sprintf("session %s: porcupine could not decide its %d operations in %s (not checked)",
				part[0].Input.(opInput).session, len(part), timeout))
		}
	}
	return bad, undecided
}

// operations is how many operations were recorded.
func (h *history) operations() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}
