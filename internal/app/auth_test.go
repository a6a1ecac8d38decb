package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/auth"
)

func keysFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rewriteKeys replaces a keys file with lines as operators should: written
// beside it, then renamed over it, so a reload never reads it half written
// (in-place writes are internal/auth's TestWatchWaitsForAnInPlaceWrite).
func rewriteKeys(t *testing.T, path string, lines ...string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func keyLine(id, tenant, key string, revoked bool) string {
	return fmt.Sprintf(`{"id":%q,"tenant":%q,"sha256":%q,"revoked":%v}`, id, tenant, auth.Digest(key), revoked)
}

func as(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// TestTenantsAndLimits: credentials are required and mapped to tenants,
// tenants never see each other's sessions, and limits answer
// RESOURCE_EXHAUSTED while the server keeps serving everyone else.
func TestTenantsAndLimits(t *testing.T) {
	conn := startServer(t, map[string]string{
		"CONTEXTD_API_KEYS_FILE": keysFile(t, "# keys of the test",
			keyLine("acme-ci", "acme", "k-acme", false), keyLine("old", "acme", "k-old", true)),
		"CONTEXTD_API_KEYS":                "globex:k-globex",
		"CONTEXTD_RATE_LIMIT_RPS":          "1",
		"CONTEXTD_RATE_LIMIT_BURST":        "6",
		"CONTEXTD_MAX_COUNT_BYTES":         "1000",
		"CONTEXTD_MAX_SESSIONS_PER_TENANT": "2",
	})
	client := contextdv1.NewContextServiceClient(conn)
	ctx := t.Context()
	acme, globex := as(ctx, "k-acme"), as(ctx, "k-globex")

	// Health needs no credentials (startServer already used it); the API does.
	for name, c := range map[string]context.Context{
		"no credentials": ctx,
		"malformed":      metadata.AppendToOutgoingContext(ctx, "authorization", "Basic abc"),
		"unknown key":    as(ctx, "k-nope"),
		"revoked key":    as(ctx, "k-old"),
	} {
		_, err := client.ListModels(c, &contextdv1.ListModelsRequest{})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := client.CreateSession(acme, &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetSession(globex, &contextdv1.GetSessionRequest{SessionId: "s"}); status.Code(err) != codes.NotFound {
		t.Errorf("globex sees acme's session: %v", err)
	}
	if _, err := client.CreateSession(globex, &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
		t.Errorf("globex cannot have its own \"s\": %v", err)
	}
	list, err := client.ListSessions(globex, &contextdv1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 1 {
		t.Errorf("globex lists %v, %v", list, err)
	}
	// Sessions per tenant.
	if _, err := client.CreateSession(acme, &contextdv1.CreateSessionRequest{Id: "s2", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateSession(acme, &contextdv1.CreateSessionRequest{Id: "s3", Model: "gpt-4o"}); status.Code(err) != codes.ResourceExhausted ||
		!strings.Contains(err.Error(), "already has 2 live sessions") {
		t.Errorf("third session: %v", err)
	}
	// Text per CountTokens.
	if _, err := client.CountTokens(globex, &contextdv1.CountTokensRequest{Encoding: "cl100k_base", Text: strings.Repeat("x", 2000)}); status.Code(err) != codes.ResourceExhausted ||
		!strings.Contains(err.Error(), "CONTEXTD_MAX_COUNT_BYTES allows 1000") {
		t.Errorf("over-size text: %v", err)
	}
	// The rate limit: acme spends its burst; globex is still served.
	var limited error
	for i := 0; i < 10 && limited == nil; i++ {
		_, limited = client.GetSession(acme, &contextdv1.GetSessionRequest{SessionId: "s"})
	}
	if status.Code(limited) != codes.ResourceExhausted || !strings.Contains(limited.Error(), "rate limit") {
		t.Errorf("rate limit: %v", limited)
	}
	if _, err := client.GetSession(globex, &contextdv1.GetSessionRequest{SessionId: "s"}); err != nil {
		t.Errorf("another tenant was throttled too: %v", err)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health: %v", err)
	}
}

func TestLoadKeysRejectsBadFiles(t *testing.T) {
	for name, line := range map[string]string{
		"not json":      "tenant=acme",
		"unknown field": `{"tenant":"acme","sha256":"` + auth.Digest("x") + `","scope":"all"}`,
		"short digest":  `{"tenant":"acme","sha256":"abcd"}`,
		"no tenant":     `{"sha256":"` + auth.Digest("x") + `"}`,
	} {
		if _, err := auth.LoadKeys(keysFile(t, line), nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := auth.LoadKeys("", []string{"no-colon"}); err == nil {
		t.Error("a malformed CONTEXTD_API_KEYS entry was accepted")
	}
}

// selfSigned writes a CA-less self-signed certificate for 127.0.0.1 and
// returns the cert and key paths.
func selfSigned(t *testing.T, name string, client bool) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	usage := x509.ExtKeyUsageServerAuth
	if client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	kb, _ := x509.MarshalECPrivateKey(key)
	_ = os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certPath, keyPath
}

// TestMutualTLS: TLS from files, client certificates required when a client
// CA is configured.
func TestMutualTLS(t *testing.T) {
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
	call := func(tc *tls.Config) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			return err
		}
		defer conn.Close()
		var last error
		for i := 0; i < 100; i++ {
			if _, last = contextdv1.NewContextServiceClient(conn).ListModels(t.Context(), &contextdv1.ListModelsRequest{}); status.Code(last) != codes.Unavailable || strings.Contains(fmt.Sprint(last), "certificate") {
				return last
			}
			time.Sleep(50 * time.Millisecond)
		}
		return last
	}
	if err := call(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	if err := call(&tls.Config{RootCAs: pool}); err == nil {
		t.Error("a client without a certificate was served")
	}
}
