package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procs is every process the soak started, by PID, so that it can end
// them all whatever way it stops (end of run, failure, panic, signal).
type procs struct {
	mu   sync.Mutex
	live map[int]string // pid → what it is
}

func newProcs() *procs { return &procs{live: map[int]string{}} }

func (p *procs) add(pid int, what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live[pid] = what
}

func (p *procs) forget(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.live, pid)
}

// killAll sends SIGCONT (a paused process) then SIGKILL to every process
// still known, by PID.
func (p *procs) killAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pid := range p.live {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		delete(p.live, pid)
	}
}

// freePort returns a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// postgres is a throwaway cluster in a temporary directory, listening on
// a loopback port (as internal/pgtest finds and runs the binaries: as the
// postgres user when we are root).
type postgres struct {
	dir, bin, asUser string
	port             int
	procs            *procs
	pid              int
}

func startPostgres(ctx context.Context, ps *procs) (*postgres, error) {
	bin := pgBinDir()
	if bin == "" {
		return nil, fmt.Errorf("initdb not found (install Debian's postgresql package)")
	}
	dir, err := os.MkdirTemp("", "contextd-soak-pg-")
	if err != nil {
		return nil, err
	}
	pg := &postgres{dir: dir, bin: bin, procs: ps}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		pg.asUser = "postgres"
	}
	if pg.port, err = freePort(); err != nil {
		return nil, err
	}
	if out, err := pg.run(ctx, "initdb", "-D", pg.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return pg, pg.start(ctx)
}

func pgBinDir() string {
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

func (pg *postgres) data() string { return filepath.Join(pg.dir, "data") }

func (pg *postgres) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	name := filepath.Join(pg.bin, tool)
	if pg.asUser != "" {
		args = append([]string{"-u", pg.asUser, "--", name}, args...)
		name = "runuser"
	}
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

func (pg *postgres) start(ctx context.Context) error {
	opts := fmt.Sprintf("-k %s -c listen_addresses=127.0.0.1 -p %d -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", pg.dir, pg.port)
	if out, err := pg.run(ctx, "pg_ctl", "start", "-D", pg.data(), "-w", "-t", "60", "-l", filepath.Join(pg.dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(pg.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	b, err := os.ReadFile(filepath.Join(pg.data(), "postmaster.pid"))
	if err != nil {
		return err
	}
	pg.pid, _ = strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	pg.procs.add(pg.pid, "postgres")
	return nil
}

// restart stops the server (fast: connections are cut) and starts it
// again after pause.
func (pg *postgres) restart(ctx context.Context, pause time.Duration) error {
	if out, err := pg.run(ctx, "pg_ctl", "stop", "-D", pg.data(), "-m", "fast", "-w"); err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	pg.procs.forget(pg.pid)
	time.Sleep(pause)
	return pg.start(ctx)
}

func (pg *postgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

// stop ends the cluster and removes its directory.
func (pg *postgres) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = pg.run(ctx, "pg_ctl", "stop", "-D", pg.data(), "-m", "immediate", "-w")
	pg.procs.forget(pg.pid)
	_ = os.RemoveAll(pg.dir)
}

// replica is one contextd process.
type replica struct {
	n                     int
	addr, metrics, logDir string
	env                   []string
	bin                   string
	procs                 *procs

	// exited is told when the process ends without kill having asked
	// (a crash: the soak counts it).
	exited func(r *replica, err error)

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	paused bool
	// killing: kill asked this process to end.
	killing bool
	starts  int
}

func (r *replica) base() string { return "http://" + r.addr }

// start runs the binary and waits until it answers.
func (r *replica) start(ctx context.Context) error {
	r.mu.Lock()
	r.starts++
	logf, err := os.OpenFile(filepath.Join(r.logDir, fmt.Sprintf("replica%d.log", r.n)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	cmd := exec.Command(r.bin)
	cmd.Env = r.env
	// Should the soak itself be killed, its replicas go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		logf.Close()
		return err
	}
	r.cmd, r.done, r.killing = cmd, make(chan struct{}), false
	done := r.done
	r.procs.add(cmd.Process.Pid, fmt.Sprintf("replica %d", r.n))
	go func() {
		err := cmd.Wait()
		logf.Close()
		r.procs.forget(cmd.Process.Pid)
		r.mu.Lock()
		asked := r.killing || r.cmd != cmd
		r.mu.Unlock()
		if !asked && r.exited != nil {
			r.exited(r, err)
		}
		close(done)
	}()
	r.mu.Unlock()
	// Each probe is bounded (a process that accepts and never answers),
	// and a process that exited is not waited for.
	probe := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-done:
			return fmt.Errorf("replica %d exited while starting (log: %s)", r.n, filepath.Join(r.logDir, fmt.Sprintf("replica%d.log", r.n)))
		default:
		}
		resp, err := probe.Get(r.base() + "/v1/models")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("replica %d did not start (log: %s)", r.n, filepath.Join(r.logDir, fmt.Sprintf("replica%d.log", r.n)))
}

// signal sends sig to the running process.
func (r *replica) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil && r.cmd.Process != nil {
		_ = syscall.Kill(r.cmd.Process.Pid, sig)
		switch sig {
		case syscall.SIGSTOP:
			r.paused = true
		case syscall.SIGCONT:
			r.paused = false
		}
	}
}

// kill ends the process with SIGKILL and waits until it is gone.
func (r *replica) kill() {
	r.mu.Lock()
	r.killing = true
	r.mu.Unlock()
	r.signal(syscall.SIGKILL)
	r.mu.Lock()
	done := r.done
	r.paused = false
	r.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}
}

// pid is the running process's id (0: none).
func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}
