package app

import (
	"bytes"
	"context"
	"github.com/prometheus/client_golang/prometheus"
	"net/http"

	"fmt"
	"google.golang.org/protobuf/encoding/protojson"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pvalidate "buf.build/go/protovalidate"
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/tokens"
	"github.com/contextd/contextd/internal/watch"
)

// TestEveryTokenizedByteIsBounded: on every path that tokenizes, text over
// CONTEXTD_MAX_COUNT_BYTES in any field (alone or spread over several) is
// ResourceExhausted naming the limit and the size, and changes nothing.
func TestEveryTokenizedByteIsBounded(t *testing.T) {
	const limit = 4096
	conn := startServer(t, map[string]string{"CONTEXTD_MAX_COUNT_BYTES": fmt.Sprint(limit)})
	client := contextdv1.NewContextServiceClient(conn)
	ctx := t.Context()
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", limit+1)
	half := strings.Repeat("y", limit/2+1) // two halves: over only together
	bigTool := []*contextdv1.ToolDefinition{{Name: "t", Description: big}}
	halfTool := []*contextdv1.ToolDefinition{{Name: "t", Description: half}}
	call := func(args string) *contextdv1.Message {
		return &contextdv1.Message{Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolCall{
			ToolCall: &contextdv1.ToolCallPart{Id: "c1", Name: "bash", ArgumentsJson: args}}}}}
	}
	inline := func(in *contextdv1.InlineContext) error {
		in.Model = "gpt-4o"
		_, err := client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_Inline{Inline: in}})
		return err
	}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"count text", func() error {
			_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Text: big})
			return err
		}},
		{"count system prompt", func() error {
			_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{SystemPrompt: big})
			return err
		}},
		{"count tools", func() error {
			_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Tools: bigTool})
			return err
		}},
		{"count messages", func() error {
			_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Messages: []*contextdv1.Message{user(half), user(half)}})
			return err
		}},
		{"count system and tools together", func() error {
			_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{SystemPrompt: half, Tools: halfTool})
			return err
		}},
		{"inline system prompt", func() error { return inline(&contextdv1.InlineContext{SystemPrompt: big}) }},
		{"inline tools", func() error { return inline(&contextdv1.InlineContext{Tools: bigTool}) }},
		{"inline messages", func() error { return inline(&contextdv1.InlineContext{Messages: []*contextdv1.Message{user(big)}}) }},
		{"create session system prompt", func() error {
			_, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "s2", Model: "gpt-4o", SystemPrompt: big})
			return err
		}},
		{"create session tools", func() error {
			_, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "s2", Model: "gpt-4o", SystemPrompt: half, Tools: halfTool})
			return err
		}},
		{"append messages", func() error {
			_, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "s", Messages: []*contextdv1.Message{user(half), call(`{"a":"` + half + `"}`)}})
			return err
		}},
		{"prepare context", func() error {
			_, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "s", Messages: []*contextdv1.Message{user(big)}})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "CONTEXTD_MAX_COUNT_BYTES allows 4096") ||
				!regexp.MustCompile(`costs \d+ bytes`).MatchString(err.Error()) {
				t.Fatalf("got %v; want ResourceExhausted naming CONTEXTD_MAX_COUNT_BYTES and the size", err)
			}
		})
	}
	// Nothing changed: no session s2, s still at version 1 and empty.
	if _, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "s2"}); status.Code(err) != codes.NotFound {
		t.Errorf("s2 after refused creates: %v", err)
	}
	got, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "s"})
	if err != nil || got.GetSession().GetVersion() != 1 || got.GetSession().GetLogCount() != 0 {
		t.Errorf("s after refused appends: %v, %v", got, err)
	}
	// Just under the limit is served.
	if _, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Text: big[:limit]}); err != nil {
		t.Errorf("text at the limit: %v", err)
	}
}

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestUnauthenticatedBodyIsNotRead: a call without valid credentials is
// refused from its headers: of an 8 MB request the server reads a fraction
// (what HTTP/2 flow control lets the client send before the answer), over
// gRPC and Connect alike, while an authenticated one is read in full.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	cfg, err := ParseConfig(nil, mapEnv(map[string]string{"CONTEXTD_API_KEYS": "acme:k-acme"}))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.LoadKeys("", cfg.APIKeys)
	if err != nil {
		t.Fatal(err)
	}
	validator, err := pvalidate.New()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	srv, err := newGRPCServer(cfg, log, validator, grpcprom.NewServerMetrics(), keys)
	if err != nil {
		t.Fatal(err)
	}
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	contextdv1.RegisterContextServiceServer(srv, api.NewContextService(engine.New(tokens.NewEncodings(), models, nil), watch.NewHub(1), log))
	front, err := newFrontend(cfg, srv, httpRoutes{}, keys, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &countingListener{Listener: inner}
	go front.serve(lis)
	t.Cleanup(func() { _ = front.srv.Close() })
	client := contextdv1.NewContextServiceClient(dial(t, lis.Addr().String()))
	req := &contextdv1.CountTokensRequest{Text: strings.Repeat("hello world ", 8<<20/12)}
	for _, key := range []string{"", "k-wrong"} {
		ctx := t.Context()
		if key != "" {
			ctx = as(ctx, key)
		}
		before := lis.read.Load()
		if _, err := client.CountTokens(ctx, req); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("key %q: %v", key, err)
		}
		if n := lis.read.Load() - before; n > 2<<20 {
			t.Errorf("key %q: the server read %d bytes of an unauthenticated 8 MB request", key, n)
		}
	}
	// Connect (HTTP/1.1, JSON): 401 with the Connect error, body unread.
	body, _ := protojson.Marshal(req)
	before := lis.read.Load()
	resp, err := http.Post("http://"+lis.Addr().String()+"/contextd.v1.ContextService/CountTokens", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(answer), `"code":"unauthenticated"`) {
		t.Errorf("Connect without credentials: %d %s", resp.StatusCode, answer)
	}
	if n := lis.read.Load() - before; n > 2<<20 {
		t.Errorf("Connect: the server read %d bytes of an unauthenticated 8 MB request", n)
	}
	before = lis.read.Load()
	if _, err := client.CountTokens(as(t.Context(), "k-acme"), req); err != nil {
		t.Fatal(err)
	}
	if n := lis.read.Load() - before; n < 8<<20 {
		t.Errorf("an authenticated 8 MB request was read as %d bytes: the counter does not count", n)
	}
}

// TestMaxConcurrentStreams: one connection holds at most
// CONTEXTD_MAX_CONCURRENT_STREAMS calls; the next waits for a free one.
func TestMaxConcurrentStreams(t *testing.T) {
	conn := startServer(t, map[string]string{"CONTEXTD_MAX_CONCURRENT_STREAMS": "2"})
	client := contextdv1.NewContextServiceClient(conn)
	if _, err := client.CreateSession(t.Context(), &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	var cancels []context.CancelFunc
	for range 2 {
		ctx, cancel := context.WithCancel(t.Context())
		cancels = append(cancels, cancel)
		stream, err := client.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{SessionId: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil { // the snapshot: the stream is open on the server
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := client.GetSession(short, &contextdv1.GetSessionRequest{SessionId: "s"}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a third call while two streams are open: %v; want it to wait (DeadlineExceeded)", err)
	}
	cancels[0]()
	ctx, cancel2 := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel2()
	if _, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "s"}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("after one stream ended: %v", err)
	}
	cancels[1]()
}

// TestMessagePagesAreByteBounded: a page of GetMessages ends at
// CONTEXTD_MAX_RESPONSE_BYTES (4 MB by default) whatever its page_size, so a
// session of large messages reads page by page within a default client's
// 4 MB receive limit, every message once, in order.
func TestMessagePagesAreByteBounded(t *testing.T) {
	// 10 MB of words is 2 million tokens: over the view's bound in
	// windows, which is not what this test is about.
	conn := startServer(t, map[string]string{"CONTEXTD_MAX_VIEW_WINDOWS": "0"})
	client := contextdv1.NewContextServiceClient(conn)
	ctx := t.Context()
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "big", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := 0; i < n; i += 2 { // 1 MB messages, two per append
		var msgs []*contextdv1.Message
		for j := i; j < i+2; j++ {
			msgs = append(msgs, user(fmt.Sprintf("%d:", j)+strings.Repeat("word ", 1<<20/5)))
		}
		if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "big", Messages: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	for _, view := range []contextdv1.MessageView{contextdv1.MessageView_MESSAGE_VIEW_ACTIVE, contextdv1.MessageView_MESSAGE_VIEW_LOG} {
		var got []string
		pages := 0
		for token := ""; ; pages++ {
			resp, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "big", View: view, PageSize: 1000, PageToken: token})
			if err != nil {
				t.Fatalf("%s page %d: %v", view, pages, err)
			}
			for _, m := range resp.GetMessages() {
				prefix, _, _ := strings.Cut(m.GetParts()[0].GetText().GetText(), ":")
				got = append(got, prefix)
			}
			if token = resp.GetNextPageToken(); token == "" {
				break
			}
		}
		if want := "0 1 2 3 4 5 6 7 8 9"; strings.Join(got, " ") != want || pages < 2 {
			t.Errorf("%s: %d pages of %v; want every message once, in order, over several pages", view, pages+1, got)
		}
	}
}
