package app

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/cors"
	"connectrpc.com/vanguard"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/prometheus/client_golang/prometheus"
	rscors "github.com/rs/cors"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/contextd/contextd/internal/auth"
)

// One port, every protocol. The listener is served by net/http (HTTP/1.1,
// HTTP/2 over TLS, and plaintext HTTP/2 with prior knowledge, "h2c"):
//
//   - native gRPC (HTTP/2, content-type application/grpc[+proto]) goes
//     straight to grpc-go's ServeHTTP;
//   - Connect (unary and streaming, JSON or binary, HTTP/1.1 or HTTP/2) and
//     gRPC-Web go through a vanguard transcoder, which turns them into gRPC
//     calls on the same grpc.Server.
//
// So every protocol reaches the handlers through the same interceptor chain
// (metrics, logging, recovery, authentication, rate limit, validation) and the
// same stats handlers (tracing). What grpc-go's own transport would do and
// ServeHTTP does not is done here: TLS (including client certificates) is
// net/http's, MaxConnectionAge is enforced per connection below, and
// graceful stop is http.Server.Shutdown (grpc.Server.GracefulStop would cut
// ServeHTTP calls instead of draining them). grpc-go's tap handle and
// keepalive enforcement do not apply on this path.

// httpRoutes are handlers mounted beside the RPCs on the same port, keyed by
// path prefix (for example "/ui/" for the dashboard). RPC paths are
// "/package.Service/Method", so a prefix such as "/ui/" never shadows one.
type httpRoutes map[string]http.Handler

// The log lines of refused calls: refusalLogRate a second, in bursts of
// refusalLogBurst.
const (
	refusalLogRate  = 5
	refusalLogBurst = 20
)

// frontend is the HTTP server of the RPC port.
type frontend struct {
	srv  *http.Server
	tls  bool
	ages *connAges
}

// newFrontend builds the HTTP server that serves grpcSrv's services over
// gRPC, gRPC-Web and Connect, plus routes, on one port.
//
// The credentials of every call of every protocol are checked from its
// headers before its body is read (authTap in limits.go, run as grpc-go's
// tap handle would be: grpc.InTapHandle has no effect under ServeHTTP).
func newFrontend(cfg Config, grpcSrv *grpc.Server, routes httpRoutes, keys *auth.Keys, reg prometheus.Registerer, log *slog.Logger) (*frontend, error) {
	caps := newBodyCaps(grpcSrv, cfg)
	var calls http.Handler = caps.handler(grpcSrv)
	if inTap := authTap(keys, cfg.AuthExemptHealth); inTap != nil {
		// A call refused here never reaches the interceptors: it is logged
		// and counted here instead, so key guessing shows.
		refused := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contextd_calls_refused_total",
			Help: "Calls refused from their headers before their body was read (missing or unknown credentials), by gRPC code and protocol.",
		}, []string{"grpc_code", "protocol"})
		if err := reg.Register(refused); err != nil {
			return nil, err
		}
		// Refusals cost the caller nothing, so their log lines are rate
		// limited (the counter counts every one): a key-guessing flood
		// writes a few lines a second, each saying how many it stands for.
		logged := rate.NewLimiter(refusalLogRate, refusalLogBurst)
		var unlogged atomic.Int64
		calls = tapped(inTap, calls, func(r *http.Request, st *status.Status) {
			proto, _ := r.Context().Value(protocolKey{}).(string)
			refused.WithLabelValues(st.Code().String(), proto).Inc()
			if !logged.Allow() {
				unlogged.Add(1)
				return
			}
			log.Warn("call refused before its body was read", "grpc.method", r.URL.Path, "protocol", proto,
				"grpc.code", st.Code().String(), "peer.address", r.RemoteAddr, "reason", st.Message(),
				"refusals_not_logged", unlogged.Swap(0))
		})
	}
	// As vanguardgrpc.NewTranscoder, but onto calls: every service of
	// grpcSrv, reached over gRPC with the binary codec.
	var services []*vanguard.Service
	for name := range grpcSrv.GetServiceInfo() {
		services = append(services, vanguard.NewService(name, calls))
	}
	transcoder, err := vanguard.NewTranscoder(services, vanguard.WithDefaultServiceOptions(
		vanguard.WithTargetProtocols(vanguard.ProtocolGRPC),
		vanguard.WithTargetCodecs(vanguard.CodecProto),
		// Bounds what vanguard buffers per message while transcoding, like
		// grpc.MaxRecvMsgSize bounds what grpc-go accepts.
		vanguard.WithMaxMessageBufferBytes(uint32(cfg.MaxMessageBytes)),
	), vanguard.WithCompression("gzip", func() connect.Compressor { return gzip.NewWriter(io.Discard) }, newBoundedGzip(cfg.MaxMessageBytes)),
		vanguard.WithCodec(func(res vanguard.TypeResolver) vanguard.Codec {
			return jsonCodec{JSONCodec: vanguard.NewJSONCodec(res), caps: caps}
		}))
	if err != nil {
		return nil, fmt.Errorf("vanguard transcoder: %w", err)
	}
	rpc := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto := protocolOf(r)
		r = r.WithContext(context.WithValue(r.Context(), protocolKey{}, proto))
		switch {
		case proto == protocolGRPC && r.ProtoMajor == 2:
			calls.ServeHTTP(w, r)
			return
		case proto == protocolConnect:
			connectUnary(r)
		}
		transcoder.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle("/", rpc)
	for prefix, h := range routes {
		mux.Handle(prefix, h)
	}
	var handler http.Handler = mux
	if len(cfg.CORSAllowedOrigins) > 0 {
		handler = rscors.New(rscors.Options{
			AllowedOrigins: cfg.CORSAllowedOrigins,
			AllowedMethods: cors.AllowedMethods(),
			// Authorization carries the API key (a header, not a cookie:
			// no credentialed CORS is needed).
			AllowedHeaders: append(cors.AllowedHeaders(), "Authorization"),
			ExposedHeaders: cors.ExposedHeaders(),
			MaxAge:         7200,
		}).Handler(handler)
	}
	if !keys.Enabled() {
		handler = hostGuard{allowed: allowedHosts(cfg.ListenAddr, cfg.AllowedHosts), next: handler}
	}
	f := &frontend{}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	f.srv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       cfg.HTTPIdleTimeout,
		Protocols:         &protocols,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		HTTP2:             http2Limits(cfg),
	}
	if cfg.TLSCertFile != "" {
		tc, err := serverTLS(cfg)
		if err != nil {
			return nil, err
		}
		f.srv.TLSConfig, f.tls = tc, true
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	if cfg.MaxConnectionAge > 0 {
		// Long-lived HTTP/2 connections pin clients to one replica; closing
		// them now and then lets Kubernetes spread load to new pods.
		f.ages = &connAges{age: cfg.MaxConnectionAge, grace: 30 * time.Second, closers: map[net.Conn]*time.Timer{}}
		f.srv.ConnContext = f.ages.connContext
		f.srv.ConnState = f.ages.connState
		f.srv.Handler = f.ages.handler(f.srv.Handler)
	}
	return f, nil
}

// serve serves lis until shutdown; it returns nil after a shutdown.
func (f *frontend) serve(lis net.Listener) error {
	var err error
	if f.tls {
		err = f.srv.ServeTLS(lis, "", "")
	} else {
		err = f.srv.Serve(lis)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// shutdown stops accepting, tells HTTP/2 clients to go away, and waits for
// open calls to finish until ctx ends; then it closes what is left. It
// reports whether the drain completed.
func (f *frontend) shutdown(ctx context.Context) bool {
	if err := f.srv.Shutdown(ctx); err != nil {
		_ = f.srv.Close()
		return false
	}
	return true
}

// The protocols of a request, by its content type.
const (
	protocolGRPC    = "grpc"
	protocolGRPCWeb = "grpc-web"
	protocolConnect = "connect"
	protocolHTTP    = "http" // anything else (a route, or an error)
)

type protocolKey struct{}

// protocolOf names the RPC protocol of r by its content type, as vanguard
// classifies it: application/grpc[+codec] is gRPC,
// application/grpc-web[+codec] gRPC-Web, application/connect+codec a Connect
// stream, and any other application/* POST (application/json,
// application/proto) or a GET with ?connect=v1 a Connect unary call.
func protocolOf(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/grpc-web"):
		return protocolGRPCWeb
	case ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+"):
		return protocolGRPC
	case strings.HasPrefix(ct, "application/connect+"),
		r.Method == http.MethodPost && strings.HasPrefix(ct, "application/"),
		r.Method == http.MethodGet && r.URL.Query().Get("connect") == "v1":
		return protocolConnect
	}
	return protocolHTTP
}

// connectUnary marks a Connect unary POST that lacks the optional
// Connect-Protocol-Version header as Connect: vanguard would otherwise read
// an application/json POST as REST, and this API has no REST routes, so
// `curl -H 'Content-Type: application/json' -d '{...}' host/pkg.Service/Method`
// works as with connect-go.
func connectUnary(r *http.Request) {
	if r.Method == http.MethodPost && r.Header.Get("Connect-Protocol-Version") == "" && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/connect+") {
		r.Header.Set("Connect-Protocol-Version", "1")
	}
}

// tapped runs inTap before next, as grpc-go runs a tap handle before it
// reads a call's body. The requests here are all gRPC (vanguard has
// translated the others), so a refusal is a gRPC trailers-only response,
// which vanguard translates back into the caller's protocol. As in grpc-go,
// an error that is not a status is PermissionDenied.
func tapped(inTap tap.ServerInHandle, next http.Handler, onRefuse func(*http.Request, *status.Status)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		md := make(metadata.MD, len(r.Header))
		for k, vs := range r.Header {
			k = strings.ToLower(k)
			if !strings.HasSuffix(k, "-bin") {
				md[k] = vs
				continue
			}
			for _, v := range vs {
				if b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "=")); err == nil {
					md[k] = append(md[k], string(b))
				}
			}
		}
		ctx, err := inTap(r.Context(), &tap.Info{FullMethodName: r.URL.Path, Header: md})
		if err != nil {
			st, ok := status.FromError(err)
			if !ok {
				st = status.New(codes.PermissionDenied, err.Error())
			}
			onRefuse(r, st)
			writeStatus(w, st)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// grpcMessage percent-encodes msg for the grpc-message header: bytes
// outside printable ASCII, and '%'.
func grpcMessage(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// jsonCodec is vanguard's JSON codec (proto3 JSON: lowerCamelCase names
// out, either name in, zero values written, unknown fields ignored) whose
// decoding errors are the client's: InvalidArgument, as connect-go answers,
// rather than vanguard's Unknown. A body is scanned against the caps
// before it is decoded (admitjson.go).
type jsonCodec struct {
	*vanguard.JSONCodec
	caps *bodyCaps
}

func (c jsonCodec) Unmarshal(data []byte, msg proto.Message) error {
	if err := c.caps.checkJSON(data, msg.ProtoReflect().Descriptor().FullName()); err != nil {
		return err
	}
	if err := c.JSONCodec.Unmarshal(data, msg); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("decode %s: %w", msg.ProtoReflect().Descriptor().FullName(), err))
	}
	return nil
}

// protocolField adds the protocol a call came in with to its log line.
func protocolField(ctx context.Context) logging.Fields {
	if p, ok := ctx.Value(protocolKey{}).(string); ok {
		return logging.Fields{"protocol", p}
	}
	return nil
}

// connAges enforces the maximum connection age: a request on a connection
// older than its age (the configured age ±10 %, so that connections opened
// together do not close together) is answered with "Connection: close",
// which makes net/http send an HTTP/2 GOAWAY (or close an HTTP/1.1
// connection after the response); a connection still open a grace period
// after its age is closed.
type connAges struct {
	age, grace time.Duration
	mu         sync.Mutex
	closers    map[net.Conn]*time.Timer
}

type connDeadlineKey struct{}

func (a *connAges) jittered() time.Duration {
	return a.age + time.Duration((rand.Float64()*0.2-0.1)*float64(a.age))
}

func (a *connAges) connContext(ctx context.Context, c net.Conn) context.Context {
	age := a.jittered()
	a.mu.Lock()
	a.closers[c] = time.AfterFunc(age+a.grace, func() { _ = c.Close() })
	a.mu.Unlock()
	return context.WithValue(ctx, connDeadlineKey{}, time.Now().Add(age))
}

func (a *connAges) connState(c net.Conn, s http.ConnState) {
	if s != http.StateClosed && s != http.StateHijacked {
		return
	}
	a.mu.Lock()
	if t, ok := a.closers[c]; ok {
		t.Stop()
		delete(a.closers, c)
	}
	a.mu.Unlock()
}

func (a *connAges) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := r.Context().Value(connDeadlineKey{}).(time.Time); ok && time.Now().After(d) {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// serverTLS loads the server certificate and, when a client CA is given,
// requires client certificates that chain to it.
func serverTLS(cfg Config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.TLSClientCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		tc.ClientCAs = x509.NewCertPool()
		if !tc.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS client CA: %s holds no PEM certificate", cfg.TLSClientCAFile)
		}
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// boundedGzip is the gzip decompressor of the transcoder: it refuses a body
// that inflates past limit bytes, as grpc-go's MaxRecvMsgSize does on native
// gRPC. (vanguard's own bound, WithMaxMessageBufferBytes, applies to the
// compressed bytes only: 400 KB of gzip can inflate to gigabytes.)
type boundedGzip struct {
	gz    gzip.Reader
	limit int64
	n     int64
}

func newBoundedGzip(limit int) func() connect.Decompressor {
	return func() connect.Decompressor { return &boundedGzip{limit: int64(limit)} }
}

func (d *boundedGzip) Read(p []byte) (int, error) {
	if d.n > d.limit {
		return 0, d.tooLarge()
	}
	// Never ask for more than one byte past the limit.
	if room := d.limit + 1 - d.n; int64(len(p)) > room {
		p = p[:room]
	}
	k, err := d.gz.Read(p)
	d.n += int64(k)
	if d.n > d.limit {
		return k, d.tooLarge()
	}
	return k, err
}

func (d *boundedGzip) tooLarge() error {
	return connect.NewError(connect.CodeResourceExhausted,
		fmt.Errorf("the request inflates past %d bytes (CONTEXTD_MAX_MESSAGE_BYTES)", d.limit))
}

func (d *boundedGzip) Reset(r io.Reader) error {
	d.n = 0
	return d.gz.Reset(r)
}

func (d *boundedGzip) Close() error { return d.gz.Close() }
