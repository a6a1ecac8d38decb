package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// -external runs the upstream and each cell's load client as processes of
// their own (this binary re-executed with -role), over loopback TCP with
// net/http's client and server, as a deployment has them: what the
// gateway adds then includes what crossing a process costs the client and
// the upstream (the syscalls, each side's JSON, its GC), not only what it
// costs a process that also runs them. contextd stays in this process, so
// -cpuprofile and the allocations are contextd's alone, and it is a
// process apart from both, as it is in a deployment.

// job is what a load client process is told to run: a cell against url.
type job struct {
	Convs, Messages, ContentBytes, Tools int
	URL, Tag                             string
}

// report is what a load client process answers: the timed calls'
// latencies, the last request's size, its CPU time in them and the wall
// time they took.
type report struct {
	Latencies []time.Duration
	Body      int
	CPU, Wall time.Duration
}

// self is this binary's path, to re-execute.
func self() string {
	exe, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	return exe
}

// spawnUpstream runs the upstream in a process of its own and returns its
// base URL, its CPU time so far (asked over HTTP: its getrusage) and a
// stop. It stops when this process does too: it exits when its stdin
// (this process's pipe) closes.
func spawnUpstream() (string, func() time.Duration, func()) {
	cmd, stdin, out := spawn("-role", "upstream")
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		fatalf("upstream process: %v", err)
	}
	base := strings.TrimSpace(line)
	cpu := func() time.Duration {
		resp, err := http.Get(base + "/cpu")
		if err != nil {
			fatalf("upstream process: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ns, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			fatalf("upstream process: /cpu: %q", b)
		}
		return time.Duration(ns)
	}
	return base, cpu, func() { stdin.Close(); _ = cmd.Wait() }
}

// serveUpstream is the upstream process (-role upstream): it prints its
// base URL and serves until its stdin closes.
func serveUpstream() {
	fmt.Println(startUpstream())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// remote is a load run by a process of its own (-role client).
type remote struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// spawnLoad starts a load client process for c against url and returns
// when its untimed calls are made.
func spawnLoad(calls int, c cell, url, tag string) load {
	spec, _ := json.Marshal(job{Convs: c.convs, Messages: c.messages, ContentBytes: c.contentBytes, Tools: c.tools, URL: url, Tag: tag})
	cmd, stdin, out := spawn("-role", "client", "-calls", strconv.Itoa(calls), "-job", string(spec))
	r := &remote{cmd: cmd, stdin: stdin, out: bufio.NewReader(out)}
	if line, err := r.out.ReadString('\n'); err != nil || line != "ready\n" {
		fatalf("load process: %q, %v", line, err)
	}
	return r
}

func (r *remote) timed() ([]time.Duration, int, time.Duration, time.Duration) {
	if _, err := io.WriteString(r.stdin, "go\n"); err != nil {
		fatalf("load process: %v", err)
	}
	var rep report
	if err := json.NewDecoder(r.out).Decode(&rep); err != nil {
		fatalf("load process: %v", err)
	}
	r.stdin.Close()
	if err := r.cmd.Wait(); err != nil {
		fatalf("load process: %v", err)
	}
	return rep.Latencies, rep.Body, rep.CPU, rep.Wall
}

// serveLoad is the load client process (-role client): it makes spec's
// untimed calls, says "ready", and on a line of its stdin makes the timed
// calls and writes their report.
func serveLoad(client *http.Client, calls int, spec string) {
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fatalf("-job: %v", err)
	}
	l := newLocal(client, calls, cell{convs: j.Convs, messages: j.Messages, contentBytes: j.ContentBytes, tools: j.Tools}, j.URL, j.Tag)
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fatalf("load process: %v", err)
	}
	cpu0 := cpuTime()
	latencies, body, _, wall := l.timed()
	rep := report{Latencies: latencies, Body: body, CPU: cpuTime() - cpu0, Wall: wall}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fatal(err)
	}
}

// spawn starts this binary again with args (a role of -external), its
// stderr this process's, and returns its stdin and stdout pipes.
func spawn(args ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	cmd := exec.Command(self(), args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fatal(err)
	}
	if err := cmd.Start(); err != nil {
		fatal(err)
	}
	return cmd, stdin, out
}
