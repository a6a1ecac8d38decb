package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// serverProc is a contextd process under test.
type serverProc struct {
	cmd  *exec.Cmd
	addr string
	conn *grpc.ClientConn
}

func startProc(t *testing.T, bin string, env ...string) *serverProc {
	t.Helper()
	addr := freePort(t)
	cmd := exec.Command(bin)
	// Bursts are part of these tests: no rate limit unless a test sets one.
	cmd.Env = append(append(os.Environ(), "CONTEXTD_LISTEN_ADDR="+addr, "CONTEXTD_METRICS_ADDR=", "CONTEXTD_RATE_LIMIT_RPS=0"), env...)
	logFile, err := os.CreateTemp(t.TempDir(), "server-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("server log:\n%s", b)
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	health := healthpb.NewHealthClient(conn)
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not healthy: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &serverProc{cmd: cmd, addr: addr, conn: conn}
}

// TestDurabilityAfterSIGKILL appends over gRPC, kills the server with
// SIGKILL mid-stream, restarts it on the same storage, and reads back every
// acknowledged message, on both backends.
func TestDurabilityAfterSIGKILL(t *testing.T) {
	bin := build(t, t.TempDir(), "contextd", "./cmd/server")
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var env []string
			if backend == "postgres" {
				env = append(env, "CONTEXTD_DATABASE_URL="+pgtest.URL(t))
			} else {
				env = append(env, "CONTEXTD_DATA_DIR="+filepath.Join(t.TempDir(), "data"))
			}
			srv := startProc(t, bin, env...)
			client := contextdv1.NewContextServiceClient(srv.conn)
			if _, err := client.CreateSession(t.Context(), &contextdv1.CreateSessionRequest{Id: "durable", Model: "gpt-4o"}); err != nil {
				t.Fatal(err)
			}
			// Append in the background until the kill; keep what was acked.
			acked := make(chan string, 1_000_000)
			done := make(chan struct{})
			// The kill comes once 20 appends were acknowledged, mid-stream:
			// a fixed 1.5 s gave fewer than 5 on a loaded machine.
			enough := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					text := fmt.Sprintf("message %d", i)
					_, err := client.AppendMessages(t.Context(), &contextdv1.AppendMessagesRequest{SessionId: "durable",
						Messages: []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{
							{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: text}}}}}}})
					if err != nil {
						return
					}
					acked <- text
					if i == 19 {
						close(enough)
					}
				}
			}()
			select {
			case <-enough:
			case <-done:
				t.Fatal("the appends failed before the kill")
			case <-time.After(2 * time.Minute):
				t.Fatal("fewer than 20 appends acknowledged in two minutes")
			}
			if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-done
			close(acked)
			var want []string
			for a := range acked {
				want = append(want, a)
			}
			if len(want) < 5 {
				t.Fatalf("only %d appends acknowledged before the kill", len(want))
			}

			again := startProc(t, bin, env...)
			client = contextdv1.NewContextServiceClient(again.conn)
			var got []string
			token := ""
			for {
				page, err := client.GetMessages(t.Context(), &contextdv1.GetMessagesRequest{SessionId: "durable",
					View: contextdv1.MessageView_MESSAGE_VIEW_LOG, PageSize: 1000, PageToken: token})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range page.GetMessages() {
					got = append(got, m.GetParts()[0].GetText().GetText())
				}
				if token = page.GetNextPageToken(); token == "" {
					break
				}
			}
			// Every acknowledged message is there, in order; at most one more
			// (committed, but killed before the answer left) may follow.
			if len(got) < len(want) || len(got) > len(want)+1 {
				t.Fatalf("read back %d messages, %d were acknowledged", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("message %d: %q, want %q", i, got[i], want[i])
				}
			}
			t.Logf("%s: %d acknowledged appends survived SIGKILL", backend, len(want))
		})
	}
}
