package app

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestHostileAppend: an append larger than a client receives (4.5 MB; the
// default receive limit is 4 MiB) commits and answers with ids, positions
// and token counts in an answer no larger than a 5-byte append's; asked
// with its content, it is refused before it is stored; its retry with the
// same idempotency key stores nothing twice; a retried create and a
// retried report take effect once. On both stores, over gRPC.
func TestHostileAppend(t *testing.T) {
	onBothStoresEnv(t, map[string]string{}, func(t *testing.T, env map[string]string) {
		client := contextdv1.NewContextServiceClient(startServer(t, env))
		ctx := t.Context()
		create := &contextdv1.CreateSessionRequest{Id: "big", Model: "gpt-4.1", SystemPrompt: "sys"}
		if _, err := client.CreateSession(ctx, create); err != nil {
			t.Fatal(err)
		}
		// The create's answer was lost: the retry answers the session.
		if again, err := client.CreateSession(ctx, create); err != nil || again.GetSession().GetVersion() != 1 {
			t.Fatalf("retried create: %v, %v", again, err)
		}
		small, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "big", Messages: []*contextdv1.Message{user("hello")}})
		if err != nil {
			t.Fatal(err)
		}
		state := func() (int64, int64) {
			t.Helper()
			s, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "big"})
			if err != nil {
				t.Fatal(err)
			}
			return s.GetSession().GetVersion(), s.GetSession().GetUsage().GetMessageCount()
		}
		huge := user(strings.Repeat("word ", 900_000)) // 4.5 MB

		// With its content the answer would be over CONTEXTD_MAX_RESPONSE_BYTES:
		// refused before the commit.
		v0, n0 := state()
		_, err = client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "big", Messages: []*contextdv1.Message{huge}, IncludeContent: true})
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "CONTEXTD_MAX_RESPONSE_BYTES") {
			t.Fatalf("append with content: %v", err)
		}
		if v, n := state(); v != v0 || n != n0 {
			t.Fatalf("the refused append changed the session: version %d→%d, messages %d→%d", v0, v, n0, n)
		}

		req := &contextdv1.AppendMessagesRequest{SessionId: "big", Messages: []*contextdv1.Message{huge}, IdempotencyKey: "step-7"}
		first, err := client.AppendMessages(ctx, req)
		if err != nil {
			t.Fatalf("a committed 4.5 MB append looks failed: %v", err)
		}
		m := first.GetMessages()
		if len(m) != 1 || m[0].GetId() == "" || m[0].GetPosition() != 2 || m[0].GetTokens() < 900_000 || len(m[0].GetParts()) != 0 {
			t.Fatalf("answer: %v", m)
		}
		if got, want := proto.Size(first.GetMessages()[0]), proto.Size(small.GetMessages()[0])+8; got > want || proto.Size(first) > 4096 {
			t.Errorf("the answer to a 4.5 MB append is %d bytes (its message %d), a 5-byte append's %d (%d)", proto.Size(first), got, proto.Size(small), want-8)
		}
		// The client did not see the answer and retries: stored once.
		retry, err := client.AppendMessages(ctx, req)
		if err != nil || retry.GetVersion() != first.GetVersion() || retry.GetMessages()[0].GetId() != m[0].GetId() {
			t.Fatalf("retry: %v, %v", retry, err)
		}
		if v, n := state(); v != first.GetVersion() || n != n0+1 {
			t.Fatalf("after the retry: version %d, %d messages; want %d, %d", v, n, first.GetVersion(), n0+1)
		}

		// A usage report retried with its key is in the ledger once.
		report := &contextdv1.ReportUsageRequest{SessionId: "big", InputTokens: 900_010, OutputTokens: 3, IdempotencyKey: "call-7"}
		for i := 0; i < 2; i++ {
			if _, err := client.ReportUsage(ctx, report); err != nil {
				t.Fatal(err)
			}
		}
		s, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "big"})
		if err != nil || s.GetSession().GetLedger().GetCalls().GetCalls() != 1 {
			t.Fatalf("ledger after a retried report: %v, %v", s.GetSession().GetLedger(), err)
		}
		report.OutputTokens = 4
		if _, err := client.ReportUsage(ctx, report); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("another report with the key: %v", err)
		}

		// The session is intact: the two messages, whole (the second alone
		// on its page, more than a default client receives).
		var got []*contextdv1.Message
		for token := ""; ; {
			page, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "big", PageToken: token}, grpc.MaxCallRecvMsgSize(8<<20))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.GetMessages()...)
			if token = page.GetNextPageToken(); token == "" {
				break
			}
		}
		if len(got) != 2 || got[1].GetParts()[0].GetText().GetText() != huge.GetParts()[0].GetText().GetText() {
			t.Fatalf("session not intact: %d messages", len(got))
		}
	})
}
