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

// TestTypeScriptClient builds @contextd/client (clients/typescript: `npm ci`,
// which compiles it with tsc) and runs its `node --test` suite against a live
// server with API keys for two tenants, over every transport the package
// offers.
func TestTypeScriptClient(t *testing.T) {
	node, npm := requireTool(t, "node"), requireTool(t, "npm")
	_ = node
	dir := npmBuild(t, npm, "clients/typescript")
	bin := build(t, t.TempDir(), "contextd", "./cmd/server")
	srv := startProc(t, bin, "CONTEXTD_DATA_DIR="+filepath.Join(t.TempDir(), "data"),
		"CONTEXTD_API_KEYS=acme:ts-key-acme,other:ts-key-other")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "test")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CONTEXTD_ADDR="+srv.addr, "CONTEXTD_TOKEN=ts-key-acme", "CONTEXTD_OTHER_TOKEN=ts-key-other")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "# fail 0") {
		t.Fatalf("npm test printed no passing summary:\n%s", out)
	}
	t.Log(string(out[strings.LastIndex(string(out), "# tests"):]))
}

// npmBuild runs `npm ci` in dir (relative to the repository) unless its
// built output is there already, and returns the absolute directory. `npm ci`
// runs the package's prepare script, which builds dist/ with tsc.
func npmBuild(t *testing.T, npm, dir string) string {
	t.Helper()
	dir = filepath.Join(repoRoot(t), dir)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	step := func(args ...string) {
		cmd := exec.CommandContext(ctx, npm, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@connectrpc", "connect")); err != nil {
		npmCI(ctx, t, npm, dir)
	} else {
		step("run", "build") // sources may have changed since the last install
	}
	return dir
}
