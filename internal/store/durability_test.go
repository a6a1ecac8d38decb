package store

import (
	"context"
	"testing"
)

// TestDurableUndoesResendable: the gateway marks a whole request
// Resendable and its recording Durable again, from the same context: the
// mark nearest the write wins.
func TestDurableUndoesResendable(t *testing.T) {
	ctx := context.Background()
	if IsResendable(ctx) {
		t.Fatal("a plain context is resendable")
	}
	r := Resendable(ctx)
	if !IsResendable(r) {
		t.Fatal("Resendable did not mark the context")
	}
	if IsResendable(Durable(r)) {
		t.Fatal("Durable did not undo Resendable")
	}
	if !IsResendable(Resendable(Durable(r))) {
		t.Fatal("Resendable after Durable did not mark the context")
	}
}
