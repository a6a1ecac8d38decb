package main

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestSessionModel: the checker accepts a history the server could have
// produced and refuses ones that lost, duplicated or reordered an
// acknowledged append, or showed a cleared message in the view.
func TestSessionModel(t *testing.T) {
	op := func(kind opKind, call, ret int64, in, out []string, unknown bool) porcupine.Operation {
		return porcupine.Operation{Input: opInput{session: "s", kind: kind, keys: in}, Call: call, Return: ret, Output: opOutput{keys: out, unknown: unknown}}
	}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"appends then a read", []porcupine.Operation{
			op(opAppend, 0, 1, []string{"a"}, []string{"a"}, false),
			op(opAppend, 2, 3, []string{"b", "c"}, []string{"a", "b", "c"}, false),
			op(opRead, 4, 5, nil, []string{"a", "b", "c"}, false),
		}, porcupine.Ok},
		{"a summary stands in for older messages", []porcupine.Operation{
			op(opAppend, 0, 1, []string{"a", "b"}, []string{"a", "b"}, false),
			op(opAppend, 2, 3, []string{"c"}, []string{"c"}, false),
		}, porcupine.Ok},
		{"a read concurrent with an append sees it or not", []porcupine.Operation{
			op(opAppend, 0, 1, []string{"a"}, []string{"a"}, false),
			op(opAppend, 2, 6, []string{"b"}, []string{"a", "b"}, false),
			op(opRead, 3, 4, nil, []string{"a"}, false),
		}, porcupine.Ok},
		{"an unknown append may have happened", []porcupine.Operation{
			op(opAppend, 0, 1, []string{"a"}, []string{"a"}, false),
			op(opAppend, 2, 1<<60, []string{"b"}, nil, true),
			op(opRead, 3, 4, nil, []string{"a", "b"}, false),
		}, porcupine.Ok},
		{"a lost append", []porcupine.Operation{
			op(opAppend, 0, 1, []string{"a"}, []string{"a"}, false),
			op(opAppend, 2, 3, []string{"b"}, []string{"a", "b"}, false),
			op(opRead, 4, 5, nil, []string{"a"}, false),
		}, porcupine.Illegal},
		{"a duplicated append", []porcupine.Operation{
			op(opAppend, 0, 1, []string{"a"}, []string{"a"}, false),
			op(opRead, 4, 5, nil, []string{"a", "a"}, false),
		}, porcupine.Illegal},
		{"a view without the message just appended", []porcupine.Operation{
			op(opAppend, 0, 1, []string{"a"}, []string{"a"}, false),
			op(opAppend, 2, 3, []string{"b"}, []string{"a"}, false),
		}, porcupine.Illegal},
		{"a cleared message back in the view", []porcupine.Operation{
			op(opAppend, 0, 1, []string{"a"}, []string{"a"}, false),
			op(opClear, 2, 3, nil, nil, false),
			op(opAppend, 4, 5, []string{"b"}, []string{"a", "b"}, false),
		}, porcupine.Illegal},
		{"after a clear, only what came after", []porcupine.Operation{
			op(opAppend, 0, 1, []string{"a"}, []string{"a"}, false),
			op(opClear, 2, 3, nil, nil, false),
			op(opAppend, 4, 5, []string{"b"}, []string{"b"}, false),
			op(opRead, 6, 7, nil, []string{"a", "b"}, false),
		}, porcupine.Ok},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperationsTimeout(sessionModel, c.ops, 0); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
