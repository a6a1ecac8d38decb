package app

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/pgtest"
)

// allocDuring returns the bytes the whole process allocated while f ran
// (server and client share it: both sides of the call are counted).
func allocDuring(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// listCost lists tenant's sessions (one page of up to 1000) and reads its
// tenant-wide watch snapshot of n sessions, returning the answer's size and
// the bytes allocated by each.
func listCost(t *testing.T, client contextdv1.ContextServiceClient, n int) (size int, listAlloc, watchAlloc uint64) {
	t.Helper()
	ctx := t.Context()
	var resp *contextdv1.ListSessionsResponse
	listAlloc = allocDuring(func() {
		var err error
		if resp, err = client.ListSessions(ctx, &contextdv1.ListSessionsRequest{PageSize: 1000}); err != nil {
			t.Fatal(err)
		}
	})
	if len(resp.GetSessions()) != n || resp.GetNextPageToken() != "" {
		t.Fatalf("listed %d sessions (next %q), want all %d on one page", len(resp.GetSessions()), resp.GetNextPageToken(), n)
	}
	watchAlloc = allocDuring(func() {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := client.WatchContextStatus(wctx, &contextdv1.WatchContextStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, err := stream.Recv(); err != nil && err != io.EOF {
				t.Fatal(err)
			}
		}
	})
	return proto.Size(resp), listAlloc, watchAlloc
}

// TestHostileListSessions (issue 24 item 4): 20 sessions with 2 MB system
// prompts used to make ListSessions a 40 MB answer that read and decoded
// every prompt (and the tenant-wide watch snapshot read every full row).
// Listing rows are summaries now, on both stores, over the real listener:
// the answer stays far under CONTEXTD_MAX_RESPONSE_BYTES and carries no
// prompt; listing and the watch snapshot allocate within 3x what they do
// for 20 sessions with one-line prompts; GetSession still returns every
// prompt intact. With a 64 KB cap and 20 KB of labels per session, pages
// end at the cap and every session is listed once.
func TestHostileListSessions(t *testing.T) {
	const n, promptBytes = 20, 2 << 20
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{"CONTEXTD_MAX_RESPONSE_BYTES": "65536"}
			if backend == "postgres" {
				env["CONTEXTD_DATABASE_URL"] = pgtest.URL(t)
			}
			client := contextdv1.NewContextServiceClient(startServer(t, env))
			ctx := t.Context()
			prompt := strings.Repeat("You are a careful agent. ", promptBytes/25)
			create := func(id, system string, labels map[string]string) {
				if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: id, Model: "gpt-4o", SystemPrompt: system, Labels: labels}); err != nil {
					t.Fatal(err)
				}
			}
			// The flat case first: 20 sessions with one-line prompts.
			for i := range n {
				create(fmt.Sprintf("small-%02d", i), "You are terse.", nil)
			}
			_, smallList, smallWatch := listCost(t, client, n)
			for i := range n {
				if _, err := client.DeleteSession(ctx, &contextdv1.DeleteSessionRequest{SessionId: fmt.Sprintf("small-%02d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				create(fmt.Sprintf("big-%02d", i), prompt, nil)
			}
			size, bigList, bigWatch := listCost(t, client, n)
			t.Logf("%s: answer %d bytes; list alloc %d vs %d (flat), watch snapshot alloc %d vs %d (flat)", backend, size, bigList, smallList, bigWatch, smallWatch)
			if size > 64<<10 {
				t.Errorf("the listing of %d sessions with 2 MB prompts is %d bytes; want it under the 64 KB cap", n, size)
			}
			if r := float64(bigList) / float64(smallList); r > 3 {
				t.Errorf("listing sessions with 2 MB prompts allocated %.1fx what one-line prompts do (%d vs %d bytes); want at most 3x", r, bigList, smallList)
			}
			if r := float64(bigWatch) / float64(smallWatch); r > 3 {
				t.Errorf("the watch snapshot of sessions with 2 MB prompts allocated %.1fx what one-line prompts do (%d vs %d bytes); want at most 3x", r, bigWatch, smallWatch)
			}
			list, err := client.ListSessions(ctx, &contextdv1.ListSessionsRequest{PageSize: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range list.GetSessions() {
				if s.GetSystemPrompt() != "" || len(s.GetTools()) != 0 || s.GetUsage().GetSystemTokens() == 0 {
					t.Errorf("%s: row has a %d-byte prompt, %d tools, %d system tokens; want a summary that counts the prompt", s.GetId(), len(s.GetSystemPrompt()), len(s.GetTools()), s.GetUsage().GetSystemTokens())
				}
			}
			for i := range n {
				got, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: fmt.Sprintf("big-%02d", i)})
				if err != nil || got.GetSession().GetSystemPrompt() != prompt {
					t.Fatalf("big-%02d after listing: prompt of %d bytes (%v), want the %d bytes stored", i, len(got.GetSession().GetSystemPrompt()), err, len(prompt))
				}
			}

			// Rows of 20 KB of labels each: pages end at the 64 KB cap.
			labels := map[string]string{}
			for k := range 64 {
				labels[fmt.Sprintf("k%02d-%s", k, strings.Repeat("x", 58))] = strings.Repeat("v", 256)
			}
			for i := range n {
				create(fmt.Sprintf("labelled-%02d", i), "Be brief.", labels)
			}
			seen := map[string]int{}
			pages := 0
			for token := ""; ; pages++ {
				page, err := client.ListSessions(ctx, &contextdv1.ListSessionsRequest{PageSize: 1000, PageToken: token, Labels: map[string]string{"k00-" + strings.Repeat("x", 58): strings.Repeat("v", 256)}})
				if err != nil {
					t.Fatal(err)
				}
				if sz := proto.Size(page); sz > 65536 {
					t.Errorf("page %d is %d bytes, over CONTEXTD_MAX_RESPONSE_BYTES=65536", pages, sz)
				}
				for _, s := range page.GetSessions() {
					seen[s.GetId()]++
				}
				if token = page.GetNextPageToken(); token == "" {
					break
				}
			}
			if len(seen) != n || pages < 2 {
				t.Errorf("%d pages listed %d labelled sessions; want all %d over several pages", pages+1, len(seen), n)
			}
			for id, c := range seen {
				if c != 1 {
					t.Errorf("%s listed %d times", id, c)
				}
			}
		})
	}
}
