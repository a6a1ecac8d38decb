package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/store"
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

// logBytesOf reads a tenant's stored log bytes straight from the server's
// store (the same database, opened beside it).
func logBytesOf(t *testing.T, env map[string]string, tenant string) int64 {
	t.Helper()
	cfg, err := ParseConfig(nil, mapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int64
	if err := s.InTx(t.Context(), func(ctx context.Context, tx store.Tx) error {
		n, err = tx.LogBytes(ctx, tenant)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHostileLogQuota: 36 appends of 1,000 bytes at once, over 6 sessions,
// against a tenant quota of 12,000 bytes of stored log: the tenant ends at
// or under the quota with no room for one more, every refusal is
// ResourceExhausted naming CONTEXTD_MAX_LOG_BYTES_PER_TENANT, and what was
// acknowledged is exactly what the logs hold. On both stores, through
// AppendMessages and through PrepareContext, whose transaction PostgreSQL
// pipelines (store.Pipelined: the insert and the quota's check, which
// must see it, are sent with the commit, and the check's refusal is the
// commit's error).
func TestHostileLogQuota(t *testing.T) {
	const quota, body = 12000, 1000
	for _, via := range []struct {
		name   string
		append func(ctx context.Context, client contextdv1.ContextServiceClient, id string, msgs []*contextdv1.Message) error
	}{
		{"AppendMessages", func(ctx context.Context, client contextdv1.ContextServiceClient, id string, msgs []*contextdv1.Message) error {
			_, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: id, Messages: msgs})
			return err
		}},
		{"PrepareContext", func(ctx context.Context, client contextdv1.ContextServiceClient, id string, msgs []*contextdv1.Message) error {
			_, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: id, Messages: msgs})
			return err
		}},
	} {
		t.Run(via.name, func(t *testing.T) {
			onBothStoresEnv(t, map[string]string{"CONTEXTD_MAX_LOG_BYTES_PER_TENANT": fmt.Sprint(quota)}, func(t *testing.T, env map[string]string) {
				testLogQuota(t, env, quota, body, via.append)
			})
		})
	}
}

func testLogQuota(t *testing.T, env map[string]string, quota, body int64, appendVia func(context.Context, contextdv1.ContextServiceClient, string, []*contextdv1.Message) error) {
	client := contextdv1.NewContextServiceClient(startServer(t, env))
	ctx := t.Context()
	for i := range 6 {
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: fmt.Sprint("s", i), Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codesSeen := map[codes.Code]int{}
	for i := range 36 {
		wg.Go(func() {
			err := appendVia(ctx, client, fmt.Sprint("s", i%6), []*contextdv1.Message{user(strings.Repeat("x", int(body)))})
			mu.Lock()
			defer mu.Unlock()
			codesSeen[status.Code(err)]++
			if status.Code(err) == codes.ResourceExhausted && !strings.Contains(status.Convert(err).Message(), "CONTEXTD_MAX_LOG_BYTES_PER_TENANT") {
				t.Errorf("refusal does not name the setting: %v", err)
			}
		})
	}
	wg.Wait()
	ok := codesSeen[codes.OK]
	if ok == 0 || ok+codesSeen[codes.ResourceExhausted] != 36 {
		t.Fatalf("answers %v", codesSeen)
	}
	stored := 0
	for i := range 6 {
		page, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: fmt.Sprint("s", i), View: contextdv1.MessageView_MESSAGE_VIEW_LOG, PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		stored += len(page.GetMessages())
	}
	used := logBytesOf(t, env, "default")
	perMessage := used / int64(ok)
	if stored != ok || used > quota || used+perMessage <= quota {
		t.Fatalf("%d appends acknowledged, %d stored, %d bytes (%d each) against a quota of %d: want every one stored, and no room for another",
			ok, stored, used, perMessage, quota)
	}
	// Refused with nothing written: a tenant at its quota is
	// refused even a small append, and the log does not move.
	err := appendVia(ctx, client, "s0", []*contextdv1.Message{user(strings.Repeat("y", int(quota-used)+1))})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("an append past the quota: %v", err)
	}
	if after := logBytesOf(t, env, "default"); after != used {
		t.Fatalf("a refused append changed the tenant's log bytes: %d, then %d", used, after)
	}
}

// TestHostileViewMessages: against CONTEXTD_MAX_VIEW_MESSAGES=5, a view of
// 4 takes one more and then refuses the next (ResourceExhausted naming the
// setting, nothing stored); a batch of 6 alone is InvalidArgument; a clear
// makes room again.
func TestHostileViewMessages(t *testing.T) {
	onBothStoresEnv(t, map[string]string{"CONTEXTD_MAX_VIEW_MESSAGES": "5"}, func(t *testing.T, env map[string]string) {
		client := contextdv1.NewContextServiceClient(startServer(t, env))
		ctx := t.Context()
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "v", Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
		batch := func(n int) []*contextdv1.Message {
			var out []*contextdv1.Message
			for i := range n {
				out = append(out, user(fmt.Sprint("m", i)))
			}
			return out
		}
		if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "v", Messages: batch(6)}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a batch of 6 against a bound of 5: %v", err)
		}
		for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
			_, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "v", Messages: batch([]int{4, 1, 1}[i])})
			if status.Code(err) != want || (err != nil && !strings.Contains(status.Convert(err).Message(), "CONTEXTD_MAX_VIEW_MESSAGES")) {
				t.Fatalf("append %d: %v; want %v naming CONTEXTD_MAX_VIEW_MESSAGES", i, err, want)
			}
		}
		sess, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "v"})
		if err != nil || sess.GetSession().GetMessageCount() != 5 {
			t.Fatalf("after the refusal: %v, %v; want 5 messages", sess, err)
		}
		if _, err := client.ClearMessages(ctx, &contextdv1.ClearMessagesRequest{SessionId: "v"}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "v", Messages: batch(5)}); err != nil {
			t.Fatalf("after a clear: %v", err)
		}
	})
}
