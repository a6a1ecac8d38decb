package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	pvalidate "buf.build/go/protovalidate"
	"connectrpc.com/connect"
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/auth"
)

// connectAPI calls the server's Connect protocol with plain net/http, the
// way any HTTP library (or curl) would.
type connectAPI struct {
	t      *testing.T
	base   string // "http://host:port"
	client *http.Client
	key    string // sent as "Authorization: Bearer <key>" when set
}

// connectError is the Connect protocol's error body.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type  string          `json:"type"`
		Value string          `json:"value"`
		Debug json.RawMessage `json:"debug"`
	} `json:"details"`
}

// post sends body as application/json to /contextd.v1.ContextService/method
// and returns the HTTP status, the response's protocol version and body.
func (c connectAPI) post(method, body string) (int, string, []byte) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.base+"/contextd.v1.ContextService/"+method, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		c.t.Fatalf("%s: content type %q (status %d): %s", method, ct, resp.StatusCode, out)
	}
	return resp.StatusCode, resp.Proto, out
}

// call sends req as JSON and decodes the answer into res; it returns the
// Connect error when the call failed.
func (c connectAPI) call(method string, req, res proto.Message) *connectError {
	c.t.Helper()
	body, err := protojson.Marshal(req)
	if err != nil {
		c.t.Fatal(err)
	}
	code, _, out := c.post(method, string(body))
	if code != http.StatusOK {
		var ce connectError
		if err := json.Unmarshal(out, &ce); err != nil || ce.Code == "" {
			c.t.Fatalf("%s: HTTP %d is no Connect error: %s", method, code, out)
		}
		return &ce
	}
	if err := protojson.Unmarshal(out, res); err != nil {
		c.t.Fatalf("%s: %v: %s", method, err, out)
	}
	return nil
}

// fields returns the field paths that the error's details name:
// google.rpc.BadRequest field violations and protovalidate violations,
// decoded from the binary detail values.
func (e *connectError) fields(t *testing.T) []string {
	t.Helper()
	var fields []string
	for _, d := range e.Details {
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			t.Fatalf("detail %s: %v", d.Type, err)
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(d.Type))
		if err != nil {
			t.Fatalf("detail %s: %v", d.Type, err)
		}
		m := mt.New().Interface()
		if err := proto.Unmarshal(raw, m); err != nil {
			t.Fatal(err)
		}
		switch m := m.(type) {
		case *errdetails.BadRequest:
			for _, v := range m.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		case *validate.Violations:
			for _, v := range m.GetViolations() {
				fields = append(fields, pvalidate.FieldPathString(v.GetField()))
			}
		}
	}
	return fields
}

func startHTTP(t *testing.T, env map[string]string) (connectAPI, contextdv1.ContextServiceClient) {
	t.Helper()
	conn := startServer(t, env)
	return connectAPI{t: t, base: "http://" + conn.Target(), client: &http.Client{}}, contextdv1.NewContextServiceClient(conn)
}

// TestConnectJSON drives every unary RPC with JSON over HTTP/1.1 and checks
// that authentication, tenancy and validation answer as over gRPC.
func TestConnectJSON(t *testing.T) {
	api, grpcClient := startHTTP(t, map[string]string{"CONTEXTD_API_KEYS": "acme:k-acme,globex:k-globex"})
	acme, globex := api, api
	acme.key, globex.key = "k-acme", "k-globex"

	t.Run("the docs' curl line", func(t *testing.T) {
		code, proto, out := acme.post("CountTokens", `{"text":"hello"}`)
		var got contextdv1.CountTokensResponse
		if err := protojson.Unmarshal(out, &got); code != http.StatusOK || proto != "HTTP/1.1" || err != nil || got.GetTotalTokens() != 1 {
			t.Fatalf("HTTP %d %s: %s (%v)", code, proto, out, err)
		}
	})
	t.Run("no key is unauthenticated", func(t *testing.T) {
		for _, key := range []string{"", "k-nope"} {
			c := api
			c.key = key
			code, _, out := c.post("ListModels", `{}`)
			var ce connectError
			if err := json.Unmarshal(out, &ce); err != nil || code != http.StatusUnauthorized || ce.Code != "unauthenticated" {
				t.Errorf("key %q: HTTP %d %s", key, code, out)
			}
		}
	})

	// A session's life through every unary RPC, as JSON; each answer is
	// decoded into its proto type and checked.
	covered := map[string]bool{}
	call := func(c connectAPI, method string, req, res proto.Message) {
		t.Helper()
		covered[method] = true
		if ce := c.call(method, req, res); ce != nil {
			t.Fatalf("%s: %s: %s", method, ce.Code, ce.Message)
		}
	}
	var (
		models   contextdv1.ListModelsResponse
		counted  contextdv1.CountTokensResponse
		created  contextdv1.CreateSessionResponse
		appended contextdv1.AppendMessagesResponse
		got      contextdv1.GetSessionResponse
		usage    contextdv1.GetContextUsageResponse
		msgs     contextdv1.GetMessagesResponse
		listed   contextdv1.ListSessionsResponse
		prepared contextdv1.PrepareContextResponse
		planned  contextdv1.CompactResponse
		compact  contextdv1.CompactResponse
		history  contextdv1.ListCompactionsResponse
		expanded contextdv1.ExpandMessageResponse
		reverted contextdv1.RevertCompactionResponse
		reported contextdv1.ReportUsageResponse
		handoff  contextdv1.CreateHandoffResponse
		deleted  contextdv1.DeleteSessionResponse
	)
	call(acme, "ListModels", &contextdv1.ListModelsRequest{}, &models)
	if len(models.GetModels()) == 0 {
		t.Fatal("ListModels: no models")
	}
	call(acme, "CountTokens", &contextdv1.CountTokensRequest{Model: "gpt-4o", Messages: []*contextdv1.Message{user("Fix the bug in main.go")}}, &counted)
	viaGRPC, err := grpcClient.CountTokens(as(t.Context(), "k-acme"), &contextdv1.CountTokensRequest{Model: "gpt-4o", Messages: []*contextdv1.Message{user("Fix the bug in main.go")}})
	if err != nil || counted.GetTotalTokens() != viaGRPC.GetTotalTokens() || counted.GetTotalTokens() == 0 {
		t.Fatalf("CountTokens: JSON %d, gRPC %d (%v)", counted.GetTotalTokens(), viaGRPC.GetTotalTokens(), err)
	}
	call(acme, "CreateSession", &contextdv1.CreateSessionRequest{Id: "web", Model: "gpt-4", Labels: map[string]string{"via": "json"}}, &created)
	msgsIn := []*contextdv1.Message{user("Fix the failing tests.")}
	for i := range 16 {
		msgsIn = append(msgsIn, toolStep(fmt.Sprintf("c%d", i), strings.Repeat("FAILED test_x - AssertionError\n", 30))...)
	}
	call(acme, "AppendMessages", &contextdv1.AppendMessagesRequest{SessionId: "web", Messages: msgsIn, IdempotencyKey: "step-1"}, &appended)
	if len(appended.GetMessages()) != len(msgsIn) || appended.GetVersion() <= created.GetSession().GetVersion() {
		t.Fatalf("AppendMessages: %d messages, version %d", len(appended.GetMessages()), appended.GetVersion())
	}
	call(acme, "GetSession", &contextdv1.GetSessionRequest{SessionId: "web"}, &got)
	call(acme, "GetContextUsage", &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_SessionId{SessionId: "web"}}, &usage)
	if got.GetSession().GetVersion() != appended.GetVersion() || usage.GetUsage().GetUsedTokens() != appended.GetUsage().GetUsedTokens() {
		t.Fatalf("GetSession/GetContextUsage disagree with the append: %v / %v", got.GetSession(), usage.GetUsage())
	}
	call(acme, "GetMessages", &contextdv1.GetMessagesRequest{SessionId: "web"}, &msgs)
	call(acme, "ListSessions", &contextdv1.ListSessionsRequest{Labels: map[string]string{"via": "json"}}, &listed)
	if len(msgs.GetMessages()) != len(msgsIn) || len(listed.GetSessions()) != 1 {
		t.Fatalf("GetMessages %d, ListSessions %d", len(msgs.GetMessages()), len(listed.GetSessions()))
	}
	call(acme, "PrepareContext", &contextdv1.PrepareContextRequest{SessionId: "web", Messages: []*contextdv1.Message{user("Go on.")}}, &prepared)
	low := 0.2
	call(acme, "Compact", &contextdv1.CompactRequest{SessionId: "web", DryRun: true, Target: &low}, &planned)
	call(acme, "Compact", &contextdv1.CompactRequest{SessionId: "web", Target: &low}, &compact)
	if !planned.GetDryRun() || !compact.GetCompacted() || len(compact.GetCompaction().GetItems()) == 0 {
		t.Fatalf("Compact: dry run %v, compacted %v", planned.GetDryRun(), compact.GetCompacted())
	}
	call(acme, "ListCompactions", &contextdv1.ListCompactionsRequest{SessionId: "web"}, &history)
	call(acme, "ExpandMessage", &contextdv1.ExpandMessageRequest{SessionId: "web", MessageId: compact.GetCompaction().GetItems()[0].GetNewMessageId()}, &expanded)
	if len(history.GetCompactions()) != 1 || len(expanded.GetOriginals()) == 0 {
		t.Fatalf("ListCompactions %d, ExpandMessage %d originals", len(history.GetCompactions()), len(expanded.GetOriginals()))
	}
	call(acme, "RevertCompaction", &contextdv1.RevertCompactionRequest{SessionId: "web", CompactionId: compact.GetCompaction().GetId()}, &reverted)
	call(acme, "ReportUsage", &contextdv1.ReportUsageRequest{SessionId: "web", InputTokens: 5000, OutputTokens: 10}, &reported)
	call(acme, "CreateHandoff", &contextdv1.CreateHandoffRequest{SessionId: "web", CreateSession: true, NewSessionId: "web-2"}, &handoff)
	if handoff.GetDocument() == "" || handoff.GetSession().GetId() != "web-2" {
		t.Fatalf("CreateHandoff: %v", &handoff)
	}
	call(acme, "DeleteSession", &contextdv1.DeleteSessionRequest{SessionId: "web-2"}, &deleted)

	t.Run("every unary RPC answers JSON", func(t *testing.T) {
		// RPCs the walk above does not know (added later) still answer
		// JSON from their handler: a result or a Connect error, never
		// "not found" or "unimplemented".
		methods := contextdv1.File_contextd_v1_context_service_proto.Services().ByName("ContextService").Methods()
		for i := range methods.Len() {
			m := methods.Get(i)
			if m.IsStreamingClient() || m.IsStreamingServer() || covered[string(m.Name())] {
				continue
			}
			code, _, out := acme.post(string(m.Name()), `{"sessionId":"web"}`)
			var ce connectError
			if code == http.StatusNotFound && json.Unmarshal(out, &ce) != nil || ce.Code == "unimplemented" {
				t.Errorf("%s: HTTP %d %s", m.Name(), code, out)
			}
		}
	})
	t.Run("another tenant's session is not found", func(t *testing.T) {
		for method, req := range map[string]proto.Message{
			"GetSession":     &contextdv1.GetSessionRequest{SessionId: "web"},
			"AppendMessages": &contextdv1.AppendMessagesRequest{SessionId: "web", Messages: []*contextdv1.Message{user("hi")}},
			"DeleteSession":  &contextdv1.DeleteSessionRequest{SessionId: "web"},
		} {
			ce := globex.call(method, req, &contextdv1.GetSessionResponse{})
			if ce == nil || ce.Code != "not_found" {
				t.Errorf("%s: %+v", method, ce)
			}
		}
		if ce := acme.call("GetSession", &contextdv1.GetSessionRequest{SessionId: "web"}, &got); ce != nil {
			t.Errorf("the owner lost its session: %+v", ce)
		}
	})
	t.Run("invalid fields name the field", func(t *testing.T) {
		for _, tc := range []struct{ method, body, field string }{
			{"CreateSession", `{"id":"no spaces allowed","model":"gpt-4o"}`, "id"}, // protovalidate
			{"CreateSession", `{"id":"ok","model":""}`, "model"},                   // protovalidate
			{"CountTokens", `{"encoding":"nope","text":"x"}`, "encoding"},          // the handler
			{"GetContextUsage", `{"inline":{"model":"gpt-4o","policy":{"warningThreshold":0.9}}}`, "inline.policy.critical_threshold"},
		} {
			code, _, out := acme.post(tc.method, tc.body)
			var ce connectError
			if err := json.Unmarshal(out, &ce); err != nil || code != http.StatusBadRequest || ce.Code != "invalid_argument" {
				t.Errorf("%s %s: HTTP %d %s", tc.method, tc.body, code, out)
				continue
			}
			if fields := ce.fields(t); len(fields) == 0 || fields[0] != tc.field {
				t.Errorf("%s %s: fields %v, want %s: %s", tc.method, tc.body, fields, tc.field, out)
			}
		}
	})
	t.Run("malformed JSON is invalid_argument", func(t *testing.T) {
		for _, body := range []string{`{"text":`, `{"text":5}`, `[]`} {
			code, _, out := acme.post("CountTokens", body)
			var ce connectError
			if err := json.Unmarshal(out, &ce); err != nil || code != http.StatusBadRequest || ce.Code != "invalid_argument" {
				t.Errorf("%s: HTTP %d %s", body, code, out)
			}
		}
	})
	t.Run("snake_case field names are accepted", func(t *testing.T) {
		code, _, out := acme.post("GetContextUsage", `{"session_id":"web"}`)
		if code != http.StatusOK || !bytes.Contains(out, []byte(`"usedTokens"`)) {
			t.Errorf("HTTP %d %s", code, out)
		}
	})
}

// TestConnectRateLimit: the per-tenant rate limit answers resource_exhausted
// (HTTP 429) over Connect too.
func TestConnectRateLimit(t *testing.T) {
	api, _ := startHTTP(t, map[string]string{"CONTEXTD_API_KEYS": "acme:k-acme", "CONTEXTD_RATE_LIMIT_RPS": "0.001", "CONTEXTD_RATE_LIMIT_BURST": "2"})
	api.key = "k-acme"
	var codes []string
	for range 3 {
		code, _, out := api.post("ListModels", `{}`)
		var ce connectError
		_ = json.Unmarshal(out, &ce)
		codes = append(codes, fmt.Sprint(code, ce.Code))
	}
	if want := []string{"200", "200", "429resource_exhausted"}; fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", codes, want)
	}
}

// TestConnectWatch: a Connect server stream (JSON over HTTP/1.1) and a
// gRPC-Web stream of WatchContextStatus deliver an append made through gRPC.
func TestConnectWatch(t *testing.T) {
	api, grpcClient := startHTTP(t, map[string]string{})
	if _, err := grpcClient.CreateSession(t.Context(), &contextdv1.CreateSessionRequest{Id: "w", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string][]connect.ClientOption{
		"connect+json": {connect.WithProtoJSON()},
		"grpc-web":     {connect.WithGRPCWeb()},
	} {
		t.Run(name, func(t *testing.T) {
			watch := connect.NewClient[contextdv1.WatchContextStatusRequest, contextdv1.WatchContextStatusResponse](
				api.client, api.base+contextdv1.ContextService_WatchContextStatus_FullMethodName, opts...)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stream, err := watch.CallServerStream(ctx, connect.NewRequest(&contextdv1.WatchContextStatusRequest{SessionId: "w"}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			if !stream.Receive() || stream.Msg().GetStatus().GetEvent() != contextdv1.StatusEvent_STATUS_EVENT_SNAPSHOT {
				t.Fatalf("first message: %v, %v", stream.Msg(), stream.Err())
			}
			snapshot := stream.Msg().GetStatus().GetVersion()
			resp, err := grpcClient.AppendMessages(t.Context(), &contextdv1.AppendMessagesRequest{SessionId: "w", Messages: []*contextdv1.Message{user("from gRPC via " + name)}})
			if err != nil {
				t.Fatal(err)
			}
			for stream.Receive() {
				st := stream.Msg().GetStatus()
				if st.GetEvent() == contextdv1.StatusEvent_STATUS_EVENT_HEARTBEAT {
					continue
				}
				if st.GetVersion() <= snapshot || st.GetEvent() != contextdv1.StatusEvent_STATUS_EVENT_APPENDED {
					t.Fatalf("after the append: %v", st)
				}
				if st.GetVersion() == resp.GetVersion() && st.GetUsage().GetUsedTokens() == resp.GetUsage().GetUsedTokens() {
					return
				}
			}
			t.Fatalf("stream ended: %v", stream.Err())
		})
	}
}

// TestGRPCWebUnary: a gRPC-Web client (binary, HTTP/1.1) gets answers and
// errors with their codes.
func TestGRPCWebUnary(t *testing.T) {
	api, _ := startHTTP(t, map[string]string{})
	count := connect.NewClient[contextdv1.CountTokensRequest, contextdv1.CountTokensResponse](
		api.client, api.base+contextdv1.ContextService_CountTokens_FullMethodName, connect.WithGRPCWeb())
	resp, err := count.CallUnary(t.Context(), connect.NewRequest(&contextdv1.CountTokensRequest{Encoding: "o200k_base", Text: "hello world"}))
	if err != nil || resp.Msg.GetTotalTokens() != 2 {
		t.Fatalf("%v, %v", resp, err)
	}
	_, err = count.CallUnary(t.Context(), connect.NewRequest(&contextdv1.CountTokensRequest{Encoding: "nope"}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || len(ce.Details()) == 0 {
		t.Fatalf("bad encoding: %v", err)
	}
	detail, err := ce.Details()[0].Value()
	if br, ok := detail.(*errdetails.BadRequest); err != nil || !ok || br.GetFieldViolations()[0].GetField() != "encoding" {
		t.Errorf("detail: %v, %v", detail, err)
	}
}

// TestH2CAndHTTP1: plaintext HTTP/2 with prior knowledge and HTTP/1.1 both
// carry Connect calls, with the binary and the JSON codec.
func TestH2CAndHTTP1(t *testing.T) {
	api, _ := startHTTP(t, map[string]string{})
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	h2cClient := &http.Client{Transport: &http.Transport{Protocols: &h2c}}
	for name, tc := range map[string]struct {
		client *http.Client
		proto  string
	}{"h2c": {h2cClient, "HTTP/2.0"}, "http1": {&http.Client{}, "HTTP/1.1"}} {
		t.Run(name, func(t *testing.T) {
			c := api
			c.client = tc.client
			if code, proto, out := c.post("CountTokens", `{"text":"hello"}`); code != http.StatusOK || proto != tc.proto {
				t.Errorf("JSON: HTTP %d %s: %s", code, proto, out)
			}
			count := connect.NewClient[contextdv1.CountTokensRequest, contextdv1.CountTokensResponse](
				tc.client, api.base+contextdv1.ContextService_CountTokens_FullMethodName) // application/proto
			if resp, err := count.CallUnary(t.Context(), connect.NewRequest(&contextdv1.CountTokensRequest{Text: "hello"})); err != nil || resp.Msg.GetTotalTokens() != 1 {
				t.Errorf("proto: %v, %v", resp, err)
			}
			grpcCount := connect.NewClient[contextdv1.CountTokensRequest, contextdv1.CountTokensResponse](
				tc.client, api.base+contextdv1.ContextService_CountTokens_FullMethodName, connect.WithGRPC())
			resp, err := grpcCount.CallUnary(t.Context(), connect.NewRequest(&contextdv1.CountTokensRequest{Text: "hello"}))
			if name == "h2c" && (err != nil || resp.Msg.GetTotalTokens() != 1) {
				t.Errorf("gRPC over h2c: %v, %v", resp, err)
			}
			if name == "http1" && err == nil {
				t.Error("gRPC over HTTP/1.1 was answered")
			}
		})
	}
}

// TestConnectOverMutualTLS: with TLS and client certificates configured,
// Connect works over HTTP/1.1 and HTTP/2 (ALPN) with a client certificate,
// and a client without one is refused.
func TestConnectOverMutualTLS(t *testing.T) {
	srvCert, srvKey := selfSigned(t, "server", false)
	cliCert, cliKey := selfSigned(t, "client", true)
	addr := freeAddr(t)
	cfg, err := ParseConfig([]string{"--listen-addr", addr, "--metrics-addr", "", "--data-dir", t.TempDir(),
		"--tls-cert-file", srvCert, "--tls-key-file", srvKey, "--tls-client-ca-file", cliCert}, mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, discardLog()) }()
	t.Cleanup(func() { cancel(); <-done })

	pool := x509.NewCertPool()
	pemBytes, _ := os.ReadFile(srvCert)
	pool.AppendCertsFromPEM(pemBytes)
	pair, err := tls.LoadX509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	client := func(http2 bool, certs ...tls.Certificate) *http.Client {
		var p http.Protocols
		p.SetHTTP1(!http2)
		p.SetHTTP2(http2)
		return &http.Client{Transport: &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
	}
	waitListening(t, addr)
	for name, tc := range map[string]struct {
		http2 bool
		proto string
	}{"HTTP/2": {true, "HTTP/2.0"}, "HTTP/1.1": {false, "HTTP/1.1"}} {
		api := connectAPI{t: t, base: "https://" + addr, client: client(tc.http2, pair)}
		if code, proto, out := api.post("CountTokens", `{"text":"hello"}`); code != http.StatusOK || proto != tc.proto {
			t.Errorf("%s: HTTP %d %s: %s", name, code, proto, out)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+addr+contextdv1.ContextService_ListModels_FullMethodName, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := client(true).Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate was served: HTTP %d", resp.StatusCode)
	}
}

// waitListening waits until addr accepts connections.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the server's log and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHTTPCallsAreObserved: Connect and gRPC-Web calls are counted by the
// gRPC metrics and logged with their protocol.
func TestHTTPCallsAreObserved(t *testing.T) {
	metricsAddr := freeAddr(t)
	var logs syncBuffer
	conn := startServerLog(t, map[string]string{"CONTEXTD_METRICS_ADDR": metricsAddr}, &logs)
	api := connectAPI{t: t, base: "http://" + conn.Target(), client: &http.Client{}}
	if code, _, out := api.post("CountTokens", `{"encoding":"nope"}`); code != http.StatusBadRequest {
		t.Fatalf("HTTP %d %s", code, out)
	}
	web := connect.NewClient[contextdv1.ListModelsRequest, contextdv1.ListModelsResponse](
		api.client, api.base+contextdv1.ContextService_ListModels_FullMethodName, connect.WithGRPCWeb())
	if _, err := web.CallUnary(t.Context(), connect.NewRequest(&contextdv1.ListModelsRequest{})); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="InvalidArgument",grpc_method="CountTokens",grpc_service="contextd.v1.ContextService",grpc_type="unary"} 1`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="ListModels",grpc_service="contextd.v1.ContextService",grpc_type="unary"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var sawConnect, sawWeb bool
	for line := range strings.Lines(logs.String()) {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) != nil || entry["msg"] != "finished call" {
			continue
		}
		switch {
		case entry["protocol"] == "connect" && entry["grpc.method"] == "CountTokens" && entry["grpc.code"] == "InvalidArgument":
			sawConnect = true
		case entry["protocol"] == "grpc-web" && entry["grpc.method"] == "ListModels" && entry["grpc.code"] == "OK":
			sawWeb = true
		}
	}
	if !sawConnect || !sawWeb {
		t.Errorf("log lacks the calls (connect %v, grpc-web %v):\n%s", sawConnect, sawWeb, logs.String())
	}
}

// TestCORS: allowed origins get the preflight and the headers a browser
// client needs; other origins get none.
func TestCORS(t *testing.T) {
	api, _ := startHTTP(t, map[string]string{"CONTEXTD_CORS_ALLOWED_ORIGINS": "https://app.example, http://localhost:5173"})
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodOptions, api.base+contextdv1.ContextService_ListModels_FullMethodName, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,connect-protocol-version,content-type") // sorted, as browsers send it
		resp, err := api.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := preflight("http://localhost:5173")
	if resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization") {
		t.Errorf("allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := preflight("https://evil.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin allowed: %v", resp.Header)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, api.base+contextdv1.ContextService_ListModels_FullMethodName, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "https://app.example")
	resp, err := api.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Grpc-Status") {
		t.Errorf("simple request: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestMaxConnectionAge: a request on a connection past its age is the
// connection's last (HTTP/2 GOAWAY); the next request opens a new one.
func TestMaxConnectionAge(t *testing.T) {
	api, _ := startHTTP(t, map[string]string{"CONTEXTD_MAX_CONNECTION_AGE": "3s"})
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	api.client = &http.Client{Transport: &http.Transport{Protocols: &h2c}}
	reused := func() bool {
		var r bool
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { r = i.Reused }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api.base+contextdv1.ContextService_ListModels_FullMethodName, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := api.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return r
	}
	reused() // opens the connection
	if !reused() {
		t.Fatal("a young connection was not reused")
	}
	time.Sleep(3500 * time.Millisecond) // past the age (3 s ± 10 %)
	reused()                            // answered, with a GOAWAY
	for i := 0; reused(); i++ {         // the GOAWAY may trail the response a moment
		if i == 300 {
			t.Fatal("the old connection is still used")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConnectWatchEndsOnShutdown: on shutdown a Connect stream ends with
// unavailable (and the hint to resume), and the drain does not wait for it.
func TestConnectWatchEndsOnShutdown(t *testing.T) {
	addr := freeAddr(t)
	cfg, err := ParseConfig([]string{"--listen-addr", addr, "--metrics-addr", "", "--data-dir", t.TempDir(),
		"--shutdown-timeout", "5m"}, mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, discardLog()) }()
	waitListening(t, addr)
	create := connect.NewClient[contextdv1.CreateSessionRequest, contextdv1.CreateSessionResponse](
		http.DefaultClient, "http://"+addr+contextdv1.ContextService_CreateSession_FullMethodName, connect.WithProtoJSON())
	if _, err := create.CallUnary(t.Context(), connect.NewRequest(&contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"})); err != nil {
		t.Fatal(err)
	}
	watch := connect.NewClient[contextdv1.WatchContextStatusRequest, contextdv1.WatchContextStatusResponse](
		http.DefaultClient, "http://"+addr+contextdv1.ContextService_WatchContextStatus_FullMethodName, connect.WithProtoJSON())
	stream, err := watch.CallServerStream(t.Context(), connect.NewRequest(&contextdv1.WatchContextStatusRequest{SessionId: "s"}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	cancel()
	for stream.Receive() {
	}
	if connect.CodeOf(stream.Err()) != connect.CodeUnavailable || !strings.Contains(stream.Err().Error(), "from_version") {
		t.Fatalf("stream ended with %v", stream.Err())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("graceful stop waited for the stream")
	}
}

// TestTapBeforeBody: the frontend checks credentials (authTap) on calls of
// every protocol from their headers, without reading their bodies; the
// refusal reaches each client in its protocol.
func TestTapBeforeBody(t *testing.T) {
	validator, err := pvalidate.New()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newGRPCServer(Config{MaxMessageBytes: 1 << 20}, discardLog(), validator, grpcprom.NewServerMetrics(), nil)
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(srv, health.NewServer())
	keys, err := auth.LoadKeys("", []string{"acme:ok"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := newFrontend(Config{MaxMessageBytes: 1 << 20}, srv, nil, keys, prometheus.NewRegistry(), discardLog()) // health is not exempt
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go f.serve(lis)
	t.Cleanup(func() { f.shutdown(t.Context()); srv.Stop() })
	base := "http://" + lis.Addr().String()
	check := base + "/grpc.health.v1.Health/Check"

	t.Run("connect, with a body that never ends", func(t *testing.T) {
		// The body ends only when the test gives up waiting; an answer
		// that came after that would have needed the whole body.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		body, w := io.Pipe()
		context.AfterFunc(ctx, func() { w.Close() })
		go w.Write([]byte(`{"service":`)) // and nothing more
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, check, body)
		req.Header.Set("Content-Type", "application/json")
		var h2c http.Protocols
		h2c.SetUnencryptedHTTP2(true)
		resp, err := (&http.Client{Transport: &http.Transport{Protocols: &h2c}}).Do(req)
		if err != nil || ctx.Err() != nil {
			t.Fatalf("no answer before the body ended: %v", err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		var ce connectError
		if err := json.Unmarshal(out, &ce); err != nil || resp.StatusCode != http.StatusUnauthorized || ce.Code != "unauthenticated" || !strings.Contains(ce.Message, `send "authorization: Bearer <API key>"`) {
			t.Errorf("HTTP %d %s", resp.StatusCode, out)
		}
	})
	for name, opts := range map[string][]connect.ClientOption{
		"connect": {connect.WithProtoJSON()}, "grpc-web": {connect.WithGRPCWeb()}, "grpc": {connect.WithGRPC()},
	} {
		t.Run(name, func(t *testing.T) {
			var h2c http.Protocols
			h2c.SetUnencryptedHTTP2(true)
			client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](
				&http.Client{Transport: &http.Transport{Protocols: &h2c}}, check, opts...)
			_, err := client.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
			if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), `send "authorization: Bearer <API key>"`) {
				t.Errorf("without a key: %v", err)
			}
			req := connect.NewRequest(&healthpb.HealthCheckRequest{})
			req.Header().Set("Authorization", "Bearer ok")
			if resp, err := client.CallUnary(t.Context(), req); err != nil || resp.Msg.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("with the key: %v, %v", resp, err)
			}
		})
	}
}
