// Package e2e runs the contextd binary as a user would and talks to it with
// grpcurl, the pinned tool from go.mod, through server reflection only (no
// .proto files).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func build(t *testing.T, dir, out, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, out)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = repoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type grpcurl struct {
	t    *testing.T
	bin  string
	addr string
}

// call runs `grpcurl -plaintext [-d data] ADDR args...` and returns its
// output; it fails the test on error.
func (g grpcurl) call(data string, args ...string) []byte {
	g.t.Helper()
	out, err := g.run(data, args...)
	if err != nil {
		g.t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
	}
	return out
}

func (g grpcurl) run(data string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := []string{"-plaintext"}
	if data != "" {
		full = append(full, "-d", data)
	}
	full = append(append(full, g.addr), args...)
	cmd := exec.CommandContext(ctx, g.bin, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

func TestGrpcurlEndToEnd(t *testing.T) {
	dir := t.TempDir()
	server := build(t, dir, "contextd", "./cmd/server")
	g := grpcurl{t: t, bin: build(t, dir, "grpcurl", "github.com/fullstorydev/grpcurl/cmd/grpcurl"), addr: freePort(t)}

	var logs bytes.Buffer
	srv := exec.Command(server)
	srv.Env = append(os.Environ(), "CONTEXTD_LISTEN_ADDR="+g.addr, "CONTEXTD_METRICS_ADDR="+freePort(t), "CONTEXTD_DATA_DIR="+dir, "CONTEXTD_RATE_LIMIT_RPS=0")
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})

	// Health: poll until SERVING.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := g.run("", "grpc.health.v1.Health/Check")
		if err == nil && strings.Contains(string(out), "SERVING") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health never SERVING: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	t.Run("list shows our service, health and reflection", func(t *testing.T) {
		out := string(g.call("", "list"))
		for _, want := range []string{"contextd.v1.ContextService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
			if !strings.Contains(out, want) {
				t.Errorf("list lacks %s:\n%s", want, out)
			}
		}
	})
	t.Run("describe shows field comments", func(t *testing.T) {
		out := string(g.call("", "describe", "contextd.v1.ContextUsage"))
		if !strings.Contains(out, "// Tokens kept free for the model's answer.") {
			t.Errorf("no comments in describe:\n%s", out)
		}
	})
	t.Run("ListModels", func(t *testing.T) {
		var resp struct {
			Models []struct {
				Name          string `json:"name"`
				ContextWindow string `json:"contextWindow"`
				Encoding      string `json:"encoding"`
			} `json:"models"`
		}
		if err := json.Unmarshal(g.call("", "contextd.v1.ContextService/ListModels"), &resp); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, m := range resp.Models {
			if m.Name == "gpt-4o" && m.ContextWindow == "128000" && m.Encoding == "o200k_base" {
				found = true
			}
		}
		if !found || len(resp.Models) < 20 {
			t.Errorf("models: %+v", resp.Models)
		}
	})
	t.Run("CountTokens", func(t *testing.T) {
		var resp struct {
			TotalTokens string `json:"totalTokens"`
			Encoding    string `json:"encoding"`
		}
		out := g.call(`{"encoding":"cl100k_base","text":"hello world"}`, "contextd.v1.ContextService/CountTokens")
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.TotalTokens != "2" || resp.Encoding != "cl100k_base" {
			t.Errorf("got %s", out)
		}
	})
	t.Run("CountTokens rejects an unknown encoding", func(t *testing.T) {
		out, err := g.run(`{"encoding":"nope","text":"x"}`, "contextd.v1.ContextService/CountTokens")
		if err == nil || !strings.Contains(string(out), "InvalidArgument") || !strings.Contains(string(out), `"field": "encoding"`) {
			t.Errorf("got %v\n%s", err, out)
		}
	})
	t.Run("GetContextUsage", func(t *testing.T) {
		req := `{"inline":{"model":"gpt-4o","system_prompt":"You are terse.","messages":[{"role":"ROLE_USER","parts":[{"text":{"text":"hello"}}]}]}}`
		var resp struct {
			Usage struct {
				ModelKnown    bool    `json:"modelKnown"`
				ContextWindow string  `json:"contextWindow"`
				UsedTokens    string  `json:"usedTokens"`
				FreeTokens    string  `json:"freeTokens"`
				Level         string  `json:"level"`
				PercentUsed   float64 `json:"percentUsed"`
			} `json:"usage"`
		}
		out := g.call(req, "contextd.v1.ContextService/GetContextUsage")
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatal(err)
		}
		u := resp.Usage
		// system 3+1+4, message 3+1+1, priming 3.
		if !u.ModelKnown || u.ContextWindow != "128000" || u.UsedTokens != "16" || u.FreeTokens != "108784" || u.Level != "CONTEXT_LEVEL_OK" {
			t.Errorf("got %s", out)
		}
	})

	// SIGTERM stops the server cleanly.
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("server exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("server did not stop after SIGTERM")
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop in the log:\n%s", logs.String())
	}
}
