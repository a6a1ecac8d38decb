package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Throwaway is URL for a program that is not a test (cmd/gatewaybench): a
// new, migrated, empty database of the throwaway cluster (started on first
// use, fsync=off like the tests'), or of CONTEXTD_TEST_DATABASE_URL's
// server. Call Stop when done.
func Throwaway() (string, error) {
	cluster.once.Do(start)
	if cluster.skip != "" {
		return "", errors.New(cluster.skip)
	}
	if cluster.err != nil {
		return "", cluster.err
	}
	name := fmt.Sprintf("p_%d_%d", os.Getpid(), cluster.seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, cluster.adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to the throwaway cluster: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+templateDB()); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	return withDatabase(cluster.adminURL, name), nil
}

// Stop stops the cluster Throwaway started (a shared server keeps running;
// only the template is dropped).
func Stop() { stop() }

// CPUTime is the CPU time the throwaway cluster's processes have used so
// far: the postmaster's own and its reaped children's, plus its live
// children's (from /proc; 0 on a shared server or without /proc).
func CPUTime() time.Duration {
	pid := PID()
	if pid == 0 {
		return 0
	}
	master := strconv.Itoa(pid)
	ticks := int64(0)
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15) cutime(16) cstime(17)
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		pid := strings.TrimSpace(s[:strings.IndexByte(s, '(')])
		f := strings.Fields(s[end+1:]) // f[0] is state, f[1] ppid, f[11] utime
		if len(f) < 15 || (pid != master && f[1] != master) {
			continue
		}
		for i, field := range f[11:15] {
			if i >= 2 && pid != master {
				break // a live child's children are not ours to count
			}
			n, _ := strconv.ParseInt(field, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// PID is the throwaway cluster's postmaster (0 on a shared server, or
// when it is not running), for a program that ends what it started by PID
// whatever way it stops.
func PID() int {
	if cluster.dir == "" {
		return 0
	}
	raw, err := os.ReadFile(filepath.Join(cluster.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}
