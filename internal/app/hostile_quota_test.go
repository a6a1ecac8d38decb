package app

import (
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestHostileQuotaRace: 40 creates at once against a quota of 5 sessions
// per tenant make exactly 5 (PostgreSQL counted and inserted under READ
// COMMITTED, so concurrent creates all counted below the quota); the others
// are ResourceExhausted. On both stores.
func TestHostileQuotaRace(t *testing.T) {
	onBothStoresEnv(t, map[string]string{"CONTEXTD_MAX_SESSIONS_PER_TENANT": "5"}, func(t *testing.T, env map[string]string) {
		client := contextdv1.NewContextServiceClient(startServer(t, env))
		ctx := t.Context()
		var wg sync.WaitGroup
		var mu sync.Mutex
		codesSeen := map[codes.Code]int{}
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: fmt.Sprint("s", i), Model: "gpt-4o"})
				mu.Lock()
				codesSeen[status.Code(err)]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		list, err := client.ListSessions(ctx, &contextdv1.ListSessionsRequest{PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(list.GetSessions()); n != 5 || codesSeen[codes.OK] != 5 || codesSeen[codes.ResourceExhausted] != 35 {
			t.Fatalf("%d sessions over a quota of 5; answers %v", n, codesSeen)
		}
	})
}
