package app

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestPageSizeAboveTheMaximumIsRefused: the served API refuses a page_size
// above 1000 (the documented maximum) on every listing RPC with
// InvalidArgument naming page_size, before any work; 1000 itself is served.
func TestPageSizeAboveTheMaximumIsRefused(t *testing.T) {
	conn := startServer(t, map[string]string{})
	client := contextdv1.NewContextServiceClient(conn)
	ctx := t.Context()
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4.1"}); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int32{1001, 2147483647, 1000} {
		calls := map[string]error{}
		_, calls["ListSessions"] = client.ListSessions(ctx, &contextdv1.ListSessionsRequest{PageSize: size})
		_, calls["GetMessages"] = client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "s", PageSize: size})
		_, calls["ListCompactions"] = client.ListCompactions(ctx, &contextdv1.ListCompactionsRequest{SessionId: "s", PageSize: size})
		for rpc, err := range calls {
			if size <= 1000 {
				if err != nil {
					t.Errorf("%s page_size %d: %v", rpc, size, err)
				}
				continue
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "page_size") {
				t.Errorf("%s page_size %d: %v; want InvalidArgument naming page_size", rpc, size, err)
			}
		}
	}
}
