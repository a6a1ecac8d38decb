package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
)

// TestRestartIsUnavailable: while PostgreSQL restarts (its connections
// cut, then refused), reads and transactions fail with
// store.ErrUnavailable, which the API answers with Unavailable (clients
// retry it) instead of Internal; once it is back they succeed again.
// Found by cmd/soak: every call during its PostgreSQL restart was
// Internal.
func TestRestartIsUnavailable(t *testing.T) {
	s, err := postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.GetSession(t.Context(), store.DefaultTenant, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("before the restart: %v, want ErrNotFound", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); pgtest.Restart(t, 2*time.Second) }()
	var down []error
	deadline := time.Now().Add(60 * time.Second)
	for len(down) < 4 && time.Now().Before(deadline) {
		_, err := s.GetSession(t.Context(), store.DefaultTenant, "nobody")
		if errors.Is(err, store.ErrNotFound) {
			select {
			case <-done: // back already: the restart was missed
				t.Fatalf("no call failed during the restart (errors seen: %v)", down)
			default:
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		down = append(down, err)
		down = append(down, s.InTx(t.Context(), func(context.Context, store.Tx) error { return nil }))
		time.Sleep(100 * time.Millisecond)
	}
	<-done
	for _, err := range down {
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("during the restart: %v, want an error wrapping store.ErrUnavailable", err)
		}
	}
	if _, err := s.GetSession(t.Context(), store.DefaultTenant, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after the restart: %v, want ErrNotFound", err)
	}
}
