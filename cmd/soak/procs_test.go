package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestReplicaExits: a replica that exits by itself is told (the soak
// counts it: a crash was invisible, its calls retried on the others), and
// start does not wait its 90 s for one that exited; a replica the soak
// kills is not told.
func TestReplicaExits(t *testing.T) {
	dir := t.TempDir()
	var told atomic.Int32
	newReplica := func(script string) *replica {
		bin := filepath.Join(dir, "bin"+script[:4])
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return &replica{addr: "127.0.0.1:1", logDir: dir, bin: bin, procs: newProcs(),
			exited: func(*replica, error) { told.Add(1) }}
	}
	crash := newReplica("exit 3")
	began := time.Now()
	if err := crash.start(context.Background()); err == nil {
		t.Fatal("a replica that exited started")
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("start took %s to see the process had exited", d)
	}
	if n := told.Load(); n != 1 {
		t.Errorf("a replica that exited by itself was told %d times, want 1", n)
	}
	sleeper := newReplica("exec sleep 60")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_ = sleeper.start(ctx) // it never answers: start gives up with ctx
	sleeper.kill()
	select {
	case <-sleeper.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the killed replica did not end")
	}
	time.Sleep(100 * time.Millisecond)
	if n := told.Load(); n != 1 {
		t.Errorf("a killed replica was told as a crash (%d calls)", n)
	}
}

// TestSharedPostgresRefused: with CONTEXTD_TEST_DATABASE_URL set the soak
// refuses at once, before it touches that server. Before, it first made a
// database there (pgtest.Throwaway: a migrated template and a copy, left
// on the shared server) and only then found it could not restart it; with
// a server that does not answer, it failed on the connection instead.
func TestSharedPostgresRefused(t *testing.T) {
	t.Setenv("CONTEXTD_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	ps := newProcs()
	pg, err := startPostgres(ps)
	if !errors.Is(err, errSharedServer) {
		t.Fatalf("startPostgres with a shared server = %v, %v; want errSharedServer", pg, err)
	}
	if len(ps.live) != 0 {
		t.Errorf("processes kept after the refusal: %v", ps.live)
	}
}
