// Package pgtest gives tests a real PostgreSQL: a throwaway cluster started
// from the local PostgreSQL binaries (initdb and pg_ctl, run as the postgres
// user when the tests run as root, listening only on a socket in a temporary
// directory), or the server named by CONTEXTD_TEST_DATABASE_URL. Every test
// gets its own database, cloned from a migrated template, which is fast.
//
// When no PostgreSQL can be found the tests skip, unless
// CONTEXTD_REQUIRE_POSTGRES=1 (set by CI), in which case they fail.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/store/postgres"
)

// cluster is the one server of this test binary; a test harness may keep
// package state, and it is torn down by Main.
var cluster struct {
	once     sync.Once
	adminURL string // connects to an administrative database
	dir      string // our cluster's directory, when we started one
	pgCtl    string
	asUser   string
	err      error
	skip     string
	seq      atomic.Int64
}

// Main runs the tests of a package and stops the cluster afterwards. Call it
// from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	stop()
	os.Exit(code)
}

// URL returns the URL of a new, migrated, empty database for t.
func URL(t testing.TB) string {
	t.Helper()
	cluster.once.Do(start)
	if cluster.skip != "" {
		if os.Getenv("CONTEXTD_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("PostgreSQL is required (CONTEXTD_REQUIRE_POSTGRES=1) but unavailable: %s", cluster.skip)
		}
		t.Skipf("no PostgreSQL: %s", cluster.skip)
	}
	if cluster.err != nil {
		t.Fatalf("PostgreSQL test cluster: %v", cluster.err)
	}
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), cluster.seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, cluster.adminURL)
	if err != nil {
		t.Fatalf("connect to test cluster: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+templateDB()); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if conn, err := pgx.Connect(ctx, cluster.adminURL); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			conn.Close(ctx)
		}
	})
	return withDatabase(cluster.adminURL, name)
}

// withDatabase replaces the database of a URL (key/value or postgres://).
func withDatabase(url, db string) string {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			return url
		}
		return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, db)
	}
	return url + " dbname=" + db
}

// templateDB is per process, so test binaries sharing one server do not
// trip over each other's template.
func templateDB() string { return fmt.Sprintf("contextd_template_%d", os.Getpid()) }

func start() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if url := os.Getenv("CONTEXTD_TEST_DATABASE_URL"); url != "" {
		cluster.adminURL = url
	} else if cluster.err = startLocal(ctx); cluster.err != nil || cluster.skip != "" {
		return
	}
	cluster.err = makeTemplate(ctx)
}

func findBinDir() string {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}

func startLocal(ctx context.Context) error {
	bin := findBinDir()
	if bin == "" {
		cluster.skip = "initdb not found (install Debian's postgresql package, or set CONTEXTD_TEST_DATABASE_URL)"
		return nil
	}
	dir, err := os.MkdirTemp("", "contextd-pg-")
	if err != nil {
		return err
	}
	cluster.dir, cluster.pgCtl = dir, filepath.Join(bin, "pg_ctl")
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: run the cluster as postgres.
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return err
		}
		cluster.asUser = "postgres"
	}
	data := filepath.Join(dir, "data")
	if out, err := run(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := startServer(ctx); err != nil {
		return err
	}
	cluster.adminURL = fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres sslmode=disable", dir)
	return nil
}

func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if cluster.asUser != "" {
		args = append([]string{"-u", cluster.asUser, "--", name}, args...)
		name = "runuser"
	}
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

func makeTemplate(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, cluster.adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+templateDB()+" WITH (FORCE)")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+templateDB()); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	s, err := postgres.Open(ctx, withDatabase(cluster.adminURL, templateDB()))
	if err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	return s.Close()
}

// startServer starts the cluster in cluster.dir: on its socket only,
// without durability (a test's data dies with it).
func startServer(ctx context.Context) error {
	opts := fmt.Sprintf("-k %s -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400", cluster.dir)
	if out, err := run(ctx, cluster.pgCtl, "start", "-D", filepath.Join(cluster.dir, "data"), "-w", "-t", "60", "-l", filepath.Join(cluster.dir, "log"), "-o", opts); err != nil {
		logText, _ := os.ReadFile(filepath.Join(cluster.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, logText)
	}
	return nil
}

// Restart stops the test cluster (fast shutdown: connections are cut) and
// starts it again after pause; tests of reconnection use it. It skips when
// the server is not one pgtest started.
func Restart(t testing.TB, pause time.Duration) {
	t.Helper()
	if cluster.dir == "" {
		t.Skip("CONTEXTD_TEST_DATABASE_URL names a server this test cannot restart")
	}
	if err := RestartCluster(pause); err != nil {
		t.Fatal(err)
	}
}

// errShared: the server is CONTEXTD_TEST_DATABASE_URL's, not ours.
var errShared = errors.New("CONTEXTD_TEST_DATABASE_URL names a server pgtest did not start and cannot restart")

// RestartCluster is Restart for a program (cmd/soak): it stops the
// throwaway cluster (fast shutdown) and starts it again after pause.
func RestartCluster(pause time.Duration) error {
	if cluster.dir == "" {
		return errShared
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := run(ctx, cluster.pgCtl, "stop", "-D", filepath.Join(cluster.dir, "data"), "-m", "fast", "-w"); err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	time.Sleep(pause)
	return startServer(ctx)
}

func stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cluster.dir == "" {
		if cluster.adminURL != "" { // a shared server: drop our template
			if conn, err := pgx.Connect(ctx, cluster.adminURL); err == nil {
				_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+templateDB()+" WITH (FORCE)")
				conn.Close(ctx)
			}
		}
		return
	}
	_, _ = run(ctx, cluster.pgCtl, "stop", "-D", filepath.Join(cluster.dir, "data"), "-m", "immediate", "-w")
	_ = os.RemoveAll(cluster.dir)
}
