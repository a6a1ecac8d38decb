package app

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestHostileRefusedFlood: 300 calls with guessed keys, as fast as they go.
// Each is refused (Unauthenticated) and counted, but the log gets a few
// lines a second, each saying how many refusals it stands for (it got one
// line per call); the tenant's session is intact. On both stores.
func TestHostileRefusedFlood(t *testing.T) {
	onBothStoresEnv(t, map[string]string{"CONTEXTD_API_KEYS": "acme:k-acme"}, func(t *testing.T, env map[string]string) {
		metricsAddr := freeAddr(t)
		env["CONTEXTD_METRICS_ADDR"] = metricsAddr
		var logs syncBuffer
		client := contextdv1.NewContextServiceClient(startServerLog(t, env, &logs))
		ctx := t.Context()
		if _, err := client.CreateSession(as(ctx, "k-acme"), &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
		const flood = 300
		start := time.Now()
		for i := range flood {
			_, err := client.GetSession(as(ctx, fmt.Sprintf("guess-%d", i)), &contextdv1.GetSessionRequest{SessionId: "s"})
			if status.Code(err) != codes.Unauthenticated {
				t.Fatalf("guess %d: %v", i, err)
			}
		}
		elapsed := time.Since(start)
		lines := strings.Count(logs.String(), `"msg":"call refused before its body was read"`)
		if most := refusalLogBurst + int(elapsed.Seconds()*refusalLogRate) + 1; lines > most || lines == 0 {
			t.Errorf("%d refusals logged in %s; want 1 to %d", lines, elapsed, most)
		}
		if lines < flood && !strings.Contains(logs.String(), `"refusals_not_logged":`) {
			t.Error("the log does not say how many refusals it left out")
		}
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf(`contextd_calls_refused_total{grpc_code="Unauthenticated",protocol="grpc"} %d`, flood); !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
		if s, err := client.GetSession(as(ctx, "k-acme"), &contextdv1.GetSessionRequest{SessionId: "s"}); err != nil || s.GetSession().GetVersion() != 1 {
			t.Fatalf("session not intact: %v, %v", s, err)
		}
	})
}
