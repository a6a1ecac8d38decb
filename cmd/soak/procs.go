package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/contextd/contextd/internal/pgtest"
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

// postgres is the soak's database: a new database on internal/pgtest's
// throwaway cluster, whose postmaster is kept in procs, so that a run
// that fails ends it too.
type postgres struct {
	dsn   string
	procs *procs
	pid   int
}

// errSharedServer: CONTEXTD_TEST_DATABASE_URL names a server the soak
// could not restart; it is refused before anything is made on it.
var errSharedServer = errors.New("the soak restarts PostgreSQL, so it needs a cluster of its own: unset CONTEXTD_TEST_DATABASE_URL")

func startPostgres(ps *procs) (*postgres, error) {
	if os.Getenv("CONTEXTD_TEST_DATABASE_URL") != "" {
		return nil, errSharedServer
	}
	dsn, err := pgtest.Throwaway()
	if err != nil {
		// The cluster may be running already (the template or the
		// database failed): it is not left behind.
		pgtest.Stop()
		return nil, err
	}
	pg := &postgres{dsn: dsn, procs: ps}
	if !pg.track() {
		pgtest.Stop()
		return nil, errors.New("the throwaway PostgreSQL has no postmaster.pid")
	}
	return pg, nil
}

// track puts the running postmaster in procs.
func (pg *postgres) track() bool {
	if pg.pid = pgtest.PID(); pg.pid == 0 {
		return false
	}
	pg.procs.add(pg.pid, "postgres")
	return true
}

// restart stops the server (fast: connections are cut) and starts it
// again after pause.
func (pg *postgres) restart(pause time.Duration) error {
	pg.procs.forget(pg.pid)
	err := pgtest.RestartCluster(pause)
	pg.track()
	return err
}

func (pg *postgres) url() string { return pg.dsn }

// stop ends the cluster and removes its directory.
func (pg *postgres) stop() {
	pgtest.Stop()
	pg.procs.forget(pg.pid)
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
