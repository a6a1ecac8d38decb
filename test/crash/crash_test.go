// Package crash_test kills the real server (the binary of cmd/server) with
// SIGKILL while conversations go through its gateway, restarts it on the
// same store, and checks that the same clients go on: every conversation's
// next call succeeds, and every session's log holds each message of its
// conversation once, in order. Run on SQLite and on PostgreSQL.
package crash_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// conversations and turns: each conversation makes at least turnsBefore
// calls before the kill can land, and turnsAfter once the server is back.
const (
	conversations = 8
	turnsBefore   = 12
	turnsAfter    = 4
)

// binary builds cmd/server into dir (CONTEXTD_CRASH_BINARY names a
// prebuilt one instead).
func binary(dir string) (string, error) {
	if b := os.Getenv("CONTEXTD_CRASH_BINARY"); b != "" {
		return b, nil
	}
	bin := filepath.Join(dir, "contextd")
	wd, _ := os.Getwd()
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/server")
	cmd.Dir = filepath.Join(wd, "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/server: %v\n%s", err, out)
	}
	return bin, nil
}

func TestKillNineUnderLoad(t *testing.T) {
	bin, err := binary(t.TempDir()) // removed with the test
	if err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			env := map[string]string{"CONTEXTD_DATA_DIR": t.TempDir()}
			if store == "postgres" {
				env["CONTEXTD_DATABASE_URL"] = pgtest.URL(t)
			}
			killNineUnderLoad(t, bin, env)
		})
	}
}

// server is the contextd process.
type server struct {
	t    *testing.T
	bin  string
	addr string
	env  []string
	cmd  *exec.Cmd
	logs bytes.Buffer
}

func (s *server) url(path string) string { return "http://" + s.addr + path }

// start runs the binary and waits until it answers.
func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin)
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = &s.logs, &s.logs
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(s.url("/v1/models")); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("server did not start:\n%s", s.logs.String())
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (s *server) kill() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	_ = s.cmd.Wait()
}

// stop ends the server gracefully.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// errAnswer is a call the server answered wrongly (not one it never
// answered because it went away).
var errAnswer = errors.New("bad answer")

// client is the clients' HTTP client; its idle connections to the killed
// server are closed before the restart.
var client = &http.Client{Transport: &http.Transport{}, Timeout: time.Minute}

// message is a Chat Completions message.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// conversation is one client: named conversations send X-Contextd-Session,
// the others are found by their history.
type conversation struct {
	n       int
	session string // "" until known
	named   bool
	history []message
}

// call sends the conversation with a new user turn; on success the turn
// and the reply join the history. An error wrapping errAnswer is an
// answer that is not a success; any other is the server gone away.
func (c *conversation) call(s *server, turn int) error {
	msgs := append(c.history[:len(c.history):len(c.history)], message{Role: "user", Content: fmt.Sprintf("conversation %d, turn %d: go on", c.n, turn)})
	body, _ := json.Marshal(map[string]any{"model": "gpt-4.1", "messages": msgs})
	req, _ := http.NewRequest(http.MethodPost, s.url("/v1/chat/completions"), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	if c.named {
		req.Header.Set("X-Contextd-Session", c.session)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("conversation %d turn %d: status %d: %s: %w", c.n, turn, resp.StatusCode, raw, errAnswer)
	}
	var out struct {
		Choices []struct {
			Message message `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
		return fmt.Errorf("conversation %d turn %d: answer %s: %v: %w", c.n, turn, raw, err, errAnswer)
	}
	if id := resp.Header.Get("X-Contextd-Session"); id != "" && !c.named {
		c.session = id
	}
	c.history = append(msgs, message{Role: "assistant", Content: out.Choices[0].Message.Content})
	return nil
}

func killNineUnderLoad(t *testing.T, bin string, env map[string]string) {
	fake := gatewaytest.New()
	t.Cleanup(fake.Close)
	s := &server{t: t, bin: bin, addr: freeAddr(t)}
	s.env = append(os.Environ(), "CONTEXTD_LISTEN_ADDR="+s.addr, "CONTEXTD_METRICS_ADDR=", "CONTEXTD_RATE_LIMIT_RPS=0",
		"CONTEXTD_OPENAI_BASE_URL="+fake.OpenAIBase(), "CONTEXTD_ANTHROPIC_BASE_URL="+fake.AnthropicBase())
	for k, v := range env {
		s.env = append(s.env, k+"="+v)
	}
	s.start()
	defer func() {
		if t.Failed() {
			t.Logf("server output:\n%s", s.logs.String())
		}
	}()

	convs := make([]*conversation, conversations)
	for i := range convs {
		convs[i] = &conversation{n: i, named: i%2 == 0}
		if convs[i].named {
			convs[i].session = fmt.Sprintf("crash-%d", i)
		}
	}
	// Every conversation calls without pause until the kill: it lands once
	// every conversation made a few calls, at a moment when calls are in
	// flight (inflight, counted around each call), so it cuts some of them
	// mid-request whatever the machine's load. A call that fails without
	// an answer (the server went away) is made again, once, after the
	// restart, and must succeed then; every conversation then makes
	// turnsAfter more calls, each of which must succeed. A call the kill
	// cut is one that failed so and had started before the kill was sent
	// (killing); one started after it found no server, and proves nothing.
	var started sync.WaitGroup
	started.Add(conversations)
	killed, restarted := make(chan struct{}), make(chan struct{})
	var inflight atomic.Int32
	var killing atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, conversations*(turnsBefore+turnsAfter))
	cut := make([]int, conversations)
	for i, c := range convs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turn := 0
			for ; !closed(killed); turn++ {
				if turn == turnsBefore {
					started.Done()
				}
				inflight.Add(1)
				alive := !killing.Load()
				err := c.call(s, turn)
				inflight.Add(-1)
				if err == nil {
					continue
				}
				if errors.Is(err, errAnswer) {
					errs <- fmt.Errorf("conversation %d, turn %d, before the kill: %w", c.n, turn, err)
					if turn < turnsBefore {
						started.Done()
					}
					return
				}
				// The server went away: after the restart, the same
				// request again.
				if alive {
					cut[i]++ // the kill cut it
				}
				<-restarted
				if err := c.call(s, turn); err != nil {
					errs <- fmt.Errorf("conversation %d, turn %d, the call after the restart: %v", c.n, turn, err)
					return
				}
				turn++
				break
			}
			if turn < turnsBefore {
				started.Done()
			}
			<-restarted
			for end := turn + turnsAfter; turn < end; turn++ {
				if err := c.call(s, turn); err != nil {
					errs <- fmt.Errorf("conversation %d, turn %d, after the restart: %w", c.n, turn, err)
					return
				}
			}
		}()
	}
	started.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for inflight.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Microsecond)
	}
	inFlight := inflight.Load()
	killing.Store(true)
	s.kill()
	close(killed)
	client.Transport.(*http.Transport).CloseIdleConnections()
	s.start()
	close(restarted)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := 0
	for _, n := range cut {
		total += n
	}
	t.Logf("%d conversations, %d calls in flight at the kill, %d calls cut by it", conversations, inFlight, total)
	if total == 0 && !t.Failed() {
		// No call that started before the kill failed by it: the kill cut
		// nothing mid-request, and nothing was tested.
		t.Fatal("the kill cut no call")
	}
	if t.Failed() {
		return
	}

	// Each conversation's log, once its last reply is recorded: every
	// message once, in order.
	sessions := listSessions(t, s)
	for _, c := range convs {
		id := c.session
		if !c.named {
			if id = sessionOf(t, s, sessions, c); c.session != "" && c.session != id {
				t.Errorf("conversation %d was told session %s, its messages are in %s", c.n, c.session, id)
			}
		}
		want := texts(c.history)
		var got []string
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got = logOf(t, s, id); len(got) >= len(want) {
				break
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("conversation %d (session %s): log\n  %s\nwant\n  %s", c.n, id, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	s.stop()
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func texts(msgs []message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role + ": " + m.Content
	}
	return out
}

// rpc calls one of contextd's RPCs over Connect (HTTP/JSON).
func rpc(t *testing.T, s *server, method string, req, out any) {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(s.url("/contextd.v1.ContextService/"+method), "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", method, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%s: %v: %s", method, err, body)
	}
}

// logOf returns a session's log as "role: text" lines.
func logOf(t *testing.T, s *server, id string) []string {
	t.Helper()
	var page struct {
		Messages []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text *struct {
					Text string `json:"text"`
				} `json:"text"`
			} `json:"parts"`
		} `json:"messages"`
	}
	rpc(t, s, "GetMessages", map[string]any{"sessionId": id, "view": "MESSAGE_VIEW_LOG", "pageSize": 1000}, &page)
	var out []string
	for _, m := range page.Messages {
		line := strings.ToLower(strings.TrimPrefix(m.Role, "ROLE_")) + ":"
		for _, p := range m.Parts {
			if p.Text != nil {
				line += " " + p.Text.Text
			}
		}
		out = append(out, line)
	}
	return out
}

func listSessions(t *testing.T, s *server) []string {
	t.Helper()
	var page struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	rpc(t, s, "ListSessions", map[string]any{"pageSize": 1000}, &page)
	ids := make([]string, len(page.Sessions))
	for i, p := range page.Sessions {
		ids[i] = p.ID
	}
	return ids
}

// sessionOf finds the one session whose log starts with the
// conversation's first message (a conversation found by its history is
// told its session only by the call that made it).
func sessionOf(t *testing.T, s *server, sessions []string, c *conversation) string {
	t.Helper()
	first := texts(c.history[:1])[0]
	var found []string
	for _, id := range sessions {
		if l := logOf(t, s, id); len(l) > 0 && l[0] == first {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		t.Fatalf("conversation %d: %d sessions start with its first message (%v); want 1", c.n, len(found), found)
	}
	return found[0]
}
