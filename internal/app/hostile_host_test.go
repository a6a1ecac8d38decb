package app

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// hostClient sends every request with Host set to host, as a browser does
// for a page whose name was rebound to this server's address.
func hostClient(host string, h2c bool) *http.Client {
	tr := &http.Transport{}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Host = host
		return tr.RoundTrip(r)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestHostileHost: without API keys (the loopback quickstart) a request
// whose Host or :authority is not a loopback name, the listen host or in
// CONTEXTD_ALLOWED_HOSTS is refused with PermissionDenied on every protocol
// and route, before it reaches a handler; the session it aimed at is
// intact. On both stores.
func TestHostileHost(t *testing.T) {
	onBothStoresEnv(t, map[string]string{"CONTEXTD_ALLOWED_HOSTS": "contextd"}, func(t *testing.T, env map[string]string) {
		conn := startServer(t, env)
		addr := conn.Target()
		_, port, _ := net.SplitHostPort(addr)
		client := contextdv1.NewContextServiceClient(conn)
		ctx := t.Context()
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "s", Messages: []*contextdv1.Message{user("hello")}}); err != nil {
			t.Fatal(err)
		}
		hostile := []string{"attacker.example:" + port, "attacker.example", "127.0.0.1.attacker.example:" + port,
			"localhost.attacker.example", "10.0.0.1:" + port}
		friendly := []string{"localhost:" + port, "LOCALHOST.:" + port, "127.0.0.1:" + port, "[::1]:" + port, "localhost", "127.0.0.1:1", "contextd:" + port}

		t.Run("gRPC", func(t *testing.T) {
			for _, host := range append(hostile[:5:5], friendly...) {
				c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(host))
				if err != nil {
					t.Fatal(err)
				}
				_, err = contextdv1.NewContextServiceClient(c).DeleteSession(ctx, &contextdv1.DeleteSessionRequest{SessionId: "nope"})
				c.Close()
				want := codes.NotFound
				if !slices.Contains(friendly, host) {
					want = codes.PermissionDenied
				}
				if status.Code(err) != want {
					t.Errorf(":authority %q: %v, want %v", host, err, want)
				}
			}
		})
		for _, h2c := range []bool{false, true} {
			name := map[bool]string{false: "HTTP/1.1", true: "h2c"}[h2c]
			t.Run("Connect "+name, func(t *testing.T) {
				for _, host := range append(hostile, friendly...) {
					api := connectAPI{t: t, base: "http://" + addr, client: hostClient(host, h2c)}
					code, _, out := api.post("DeleteSession", `{"sessionId":"nope"}`)
					var ce connectError
					_ = json.Unmarshal(out, &ce)
					want := "not_found"
					if !slices.Contains(friendly, host) {
						want = "permission_denied"
					}
					if ce.Code != want {
						t.Errorf("Host %q: HTTP %d %s, want %s", host, code, out, want)
					}
				}
			})
			t.Run("gRPC-Web "+name, func(t *testing.T) {
				del := connect.NewClient[contextdv1.DeleteSessionRequest, contextdv1.DeleteSessionResponse](
					hostClient("attacker.example:"+port, h2c), "http://"+addr+contextdv1.ContextService_DeleteSession_FullMethodName, connect.WithGRPCWeb())
				_, err := del.CallUnary(ctx, connect.NewRequest(&contextdv1.DeleteSessionRequest{SessionId: "s"}))
				if ce := new(connect.Error); !errors.As(err, &ce) || ce.Code() != connect.CodePermissionDenied {
					t.Errorf("gRPC-Web: %v", err)
				}
			})
			t.Run("dashboard "+name, func(t *testing.T) {
				for host, want := range map[string]int{"attacker.example:" + port: http.StatusForbidden, "localhost:" + port: http.StatusOK} {
					resp, err := hostClient(host, h2c).Get("http://" + addr + "/ui/")
					if err != nil {
						t.Fatal(err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != want {
						t.Errorf("/ui/ with Host %q: HTTP %d, want %d: %.200s", host, resp.StatusCode, want, body)
					}
					if want == http.StatusForbidden && !strings.Contains(string(body), "CONTEXTD_ALLOWED_HOSTS") {
						t.Errorf("the refusal does not say what to do: %s", body)
					}
				}
			})
			t.Run("any route "+name, func(t *testing.T) {
				// A route mounted later (a gateway under /v1/) is behind
				// the same guard: here an unknown path.
				resp, err := hostClient("attacker.example", h2c).Post("http://"+addr+"/v1/chat/completions", "text/plain", strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("/v1/chat/completions: HTTP %d", resp.StatusCode)
				}
			})
		}
		// The session the hostile calls aimed at (DeleteSession "s") is
		// intact.
		got, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "s"})
		if err != nil || len(got.GetMessages()) != 1 {
			t.Fatalf("session not intact: %v, %v", got, err)
		}
	})
}

// TestHostCheckIsOffWithKeys: with API keys a page cannot authenticate, so
// any Host is served (a server behind a load balancer's name).
func TestHostCheckIsOffWithKeys(t *testing.T) {
	conn := startServer(t, map[string]string{"CONTEXTD_API_KEYS": "acme:k-acme"})
	c, err := grpc.NewClient(conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("contextd.internal.example"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := contextdv1.NewContextServiceClient(c).ListModels(as(t.Context(), "k-acme"), &contextdv1.ListModelsRequest{}); err != nil {
		t.Fatal(err)
	}
}

// TestAllowedHostNames: the names a Host header is compared by.
func TestAllowedHostNames(t *testing.T) {
	allowed := allowedHosts("10.1.2.3:50051", []string{"Contextd.Example."})
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8080": true, "LocalHost.": true, "127.0.0.1:1": true, "[::1]:50051": true, "[::1]": true,
		"10.1.2.3:50051": true, "contextd.example:443": true,
		"": false, "localhost:80@evil": false, "localhost:x": false, "evil:50051": false, "127.0.0.2": false, "[::2]": false,
		"contextd.example.evil": false, "0.0.0.0:50051": false,
	} {
		if got := allowed[canonicalHost(host)]; got != want {
			t.Errorf("%q: %v, want %v", host, got, want)
		}
	}
	if allowedHosts("0.0.0.0:50051", nil)["0.0.0.0"] || allowedHosts(":50051", nil)[""] {
		t.Error("an unspecified listen address names no host")
	}
	if allowedHosts("localhost:1", []string{"*"}) != nil {
		t.Error("* allows every host")
	}
}
