package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/pgtest"
)

// TestMigrateSubcommand runs `contextd migrate` the way a Kubernetes Job
// would: twice at once against one fresh PostgreSQL database (the advisory
// lock serializes them), then again (nothing to do), and once on SQLite.
func TestMigrateSubcommand(t *testing.T) {
	bin := build(t, t.TempDir(), "contextd", "./cmd/server")
	migrate := func(env ...string) <-chan string {
		out := make(chan string, 1)
		go func() {
			cmd := exec.Command(bin, "migrate")
			cmd.Env = append(os.Environ(), env...)
			b, err := cmd.CombinedOutput()
			if err != nil {
				out <- "FAILED: " + err.Error() + "\n" + string(b)
				return
			}
			out <- string(b)
		}()
		return out
	}
	pg := "CONTEXTD_DATABASE_URL=" + pgtest.URL(t)
	a, b := migrate(pg), migrate(pg)
	for _, out := range []string{<-a, <-b, <-migrate(pg), <-migrate("CONTEXTD_DATA_DIR=" + filepath.Join(t.TempDir(), "d"))} {
		if strings.HasPrefix(out, "FAILED") || !strings.Contains(out, `"msg":"migrations applied"`) {
			t.Errorf("migrate: %s", out)
		}
	}
}
