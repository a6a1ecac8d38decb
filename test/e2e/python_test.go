package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// debianPython is the interpreter the Python client is tested with: Debian's
// system python3 with its python3-grpcio and python3-protobuf packages (not
// whatever python3 comes first on PATH).
const debianPython = "/usr/bin/python3"

// requirePython returns a python that has the client installed the way a
// user installs it: `pip install clients/python` (offline, with Debian's
// setuptools) into a virtualenv that sees Debian's grpcio and protobuf. It
// skips when those are missing unless CONTEXTD_REQUIRE_PYTHON=1 (set by CI)
// makes that a failure.
func requirePython(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CONTEXTD_REQUIRE_PYTHON") == "1" {
			t.Fatalf("CONTEXTD_REQUIRE_PYTHON=1: "+format, args...)
		}
		t.Skipf(format, args...)
	}
	for _, check := range [][]string{{"-c", "import grpc, google.protobuf, setuptools, venv"}, {"-m", "pip", "--version"}} {
		if out, err := exec.Command(debianPython, check...).CombinedOutput(); err != nil {
			missing("%s lacks Debian's python3-grpcio, python3-protobuf, python3-pip or python3-venv: %v\n%s", debianPython, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	tmp := t.TempDir()
	// Build from a copy so that setuptools' build/ stays out of the repository.
	src := filepath.Join(tmp, "src")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(repoRoot(t), "clients", "python"))); err != nil {
		t.Fatal(err)
	}
	venv := filepath.Join(tmp, "venv")
	run(debianPython, "-m", "venv", "--system-site-packages", "--without-pip", venv)
	py := filepath.Join(venv, "bin", "python")
	run(py, "-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation", src)
	return py
}

// TestPythonClient installs clients/python and runs its unittest suite
// against a live server with API keys for two tenants.
func TestPythonClient(t *testing.T) {
	py := requirePython(t)
	bin := build(t, t.TempDir(), "contextd", "./cmd/server")
	srv := startProc(t, bin, "CONTEXTD_DATA_DIR="+filepath.Join(t.TempDir(), "data"),
		"CONTEXTD_API_KEYS=acme:py-key-acme,other:py-key-other")
	out := runPython(t, py, []string{"CONTEXTD_ADDR=" + srv.addr, "CONTEXTD_TOKEN=py-key-acme", "CONTEXTD_OTHER_TOKEN=py-key-other"},
		"-m", "unittest", "discover", "-v", "-s", filepath.Join(repoRoot(t), "clients", "python", "tests"))
	if !strings.Contains(out, "\nOK") {
		t.Fatalf("unittest did not pass:\n%s", out)
	}
	t.Log(out)
}

// TestPythonAgentExample runs examples/python/agent.py end to end on the
// installed client, with an API key; it fails unless compaction happened on
// its own, and prints the same kind of report as the Node example.
func TestPythonAgentExample(t *testing.T) {
	py := requirePython(t)
	bin := build(t, t.TempDir(), "contextd", "./cmd/server")
	srv := startProc(t, bin, "CONTEXTD_DATA_DIR="+filepath.Join(t.TempDir(), "data"), "CONTEXTD_API_KEYS=acme:py-key")
	out := runPython(t, py, []string{"CONTEXTD_API_KEY=py-key"},
		filepath.Join(repoRoot(t), "examples", "python", "agent.py"), srv.addr, "40")
	if !strings.Contains(out, "done: 40 model calls") || !strings.Contains(out, "[watch] v") || !strings.Contains(out, "compacted (") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Log(out[strings.LastIndex(out, "done:"):])
}

func runPython(t *testing.T, py string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Dir = t.TempDir() // imports come from the installed package, not the checkout
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
