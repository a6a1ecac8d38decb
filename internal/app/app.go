// Package app is the composition root: it builds every dependency from the
// configuration, wires the gRPC server with its interceptors, health,
// reflection and metrics, and runs it until the context ends, then stops it
// gracefully.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/protovalidate"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pvalidate "buf.build/go/protovalidate"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/gateway"
	"github.com/contextd/contextd/internal/provider"
	"github.com/contextd/contextd/internal/retention"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/summarize"
	"github.com/contextd/contextd/internal/telemetry"
	"github.com/contextd/contextd/internal/tokens"
	"github.com/contextd/contextd/internal/ui"
	"github.com/contextd/contextd/internal/watch"
)

// notServingGrace is how long a stopping server lets health watchers hear
// NOT_SERVING before it cancels their streams.
const notServingGrace = 50 * time.Millisecond

// Run serves until ctx ends, then stops gracefully. It returns nil after a
// clean stop.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	encodings := tokens.NewEncodings(cfg.TokenizersDir)
	if err := encodings.Preload(); err != nil {
		return fmt.Errorf("load encodings: %w", err)
	}
	var overrides []tokens.Model
	if cfg.ModelsFile != "" {
		var err error
		if overrides, err = tokens.LoadModelsFile(cfg.ModelsFile); err != nil {
			return err
		}
	}
	models, err := tokens.NewRegistry(overrides)
	if err != nil {
		return fmt.Errorf("model registry: %w", err)
	}
	models, approximated := models.WithAvailable(encodings.Available)
	if len(approximated) > 0 {
		log.Info("vocabularies not imported; these models are counted approximately with cl100k_base",
			"models", approximated, "tokenizers_dir", cfg.TokenizersDir)
	}
	st, err := OpenStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	metrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Live status: changes are announced (NOTIFY on PostgreSQL, in process on
	// SQLite), resolved once into statuses, and fanned out by the hub.
	hub := watch.NewHub(cfg.WatchMaxSubs).WithTenantLimit(cfg.WatchMaxSubsPerTenant)
	domain := telemetry.NewMetrics(reg, func() float64 { return float64(hub.Count()) })
	var eng *engine.Engine
	resolver := watch.NewResolver(hub, func(ctx context.Context, c watch.Change) (watch.Update, bool, error) {
		return api.ResolveStatus(eng)(ctx, c)
	}, log)
	var notifier engine.Notifier = watch.LocalNotifier{R: resolver}
	if pg, ok := st.(*postgres.Store); ok {
		notifier = watch.PGNotifier{Pool: pg.Pool(), Log: log}
	}
	if lite, ok := st.(*sqlite.Store); ok {
		telemetry.RegisterSQLite(reg, lite)
	}
	summarizers, err := summarize.NewSet(cfg.Summarizer, summarizerEndpoints(cfg))
	if err != nil {
		return fmt.Errorf("CONTEXTD_SUMMARIZER: %w", err)
	}
	summarizers.Allow(cfg.SummarizersAllowed)
	opts := []engine.Option{engine.WithRevertWindow(cfg.RevertWindow), engine.WithNotifier(notifier), engine.WithSummarizers(summarizers),
		engine.WithLimits(engine.Limits{MaxCountBytes: cfg.MaxCountBytes, MaxSessionsPerTenant: cfg.MaxSessionsPerTenant,
			CountBudgetBytes: int64(cfg.CountBudgetBytes), LargeCountBytes: cfg.LargeCountBytes, MaxResponseBytes: cfg.MaxResponseBytes,
			MaxViewBytes: cfg.MaxViewBytes, MaxViewWindows: cfg.MaxViewWindows,
			MaxViewMessages: cfg.MaxViewMessages, MaxLogBytesPerTenant: int64(cfg.MaxLogBytesPerTenant),
			ExpandMaxRounds: cfg.ExpandMaxRounds, ExpandToolBytes: cfg.ExpandToolBytes}),
		engine.WithMetrics(domain), engine.WithLogger(log), engine.WithViewCacheBytes(int64(cfg.ViewCacheBytes)),
		engine.WithBackground(cfg.Background)}
	if cfg.AnthropicCountTokens {
		opts = append(opts, engine.WithProviderCounter(provider.NewAnthropicCounter(provider.Config{
			BaseURL: cfg.AnthropicBaseURL, APIKey: cfg.AnthropicAPIKey, Timeout: cfg.SummarizerTimeout, MaxRetries: cfg.SummarizerMaxRetries})))
	}
	eng = engine.New(encodings, models, st, opts...)
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	go resolver.Run(watchCtx)
	go retention.Run(watchCtx, st, cfg.RetentionInterval, cfg.ArchiveRetention, retention.Idle{Label: gateway.SessionLabel, After: cfg.GatewaySessionTTL}, log)
	// Background compaction workers stop (handing their leases back) before
	// the store closes.
	jobsCtx, stopJobs := context.WithCancel(context.WithoutCancel(ctx))
	jobsDone := make(chan struct{})
	go func() { defer close(jobsDone); eng.RunJobs(jobsCtx) }()
	defer func() { stopJobs(); <-jobsDone }()
	if _, ok := st.(*postgres.Store); ok {
		resync := func() {
			resolver.Resync(func(tenant string) []string {
				// Every session of the tenant, page by page (not just the first).
				var ids []string
				for token := ""; ; {
					views, next, err := eng.ListSessions(watchCtx, tenant, nil, engine.Page{Size: 1000, Token: token})
					if err != nil {
						log.Warn("watch resync: list sessions failed", "tenant", tenant, "error", err)
						return ids
					}
					for _, v := range views {
						ids = append(ids, v.ID)
					}
					if next == "" {
						return ids
					}
					token = next
				}
			})
		}
		go watch.Listen(watchCtx, cfg.DatabaseURL, resolver, resync, log)
	}

	validator, err := pvalidate.New()
	if err != nil {
		return fmt.Errorf("protovalidate: %w", err)
	}

	keys, err := LoadAuth(cfg, log)
	if err != nil {
		return err
	}
	watchKeys(watchCtx, cfg, keys, log)
	var extra []grpc.ServerOption
	if telemetry.TracingEnabled(os.Getenv) {
		tracing, err := telemetry.NewTracing(ctx, nil)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tracing.Shutdown(sctx)
		}()
		extra = append(extra, tracing.ServerOption())
		log.Info("tracing on", "exporter", os.Getenv("OTEL_TRACES_EXPORTER"))
	}
	drain := newStreamDrain()
	extra = append(extra, grpc.ChainStreamInterceptor(drain.interceptor))
	srv, err := newGRPCServer(cfg, log, validator, metrics, keys, extra...)
	if err != nil {
		return err
	}
	contextdv1.RegisterContextServiceServer(srv, api.NewContextService(eng, hub, log))
	healthSrv := health.NewServer()
	healthpb.RegisterHealthServer(srv, healthSrv)
	if err := api.RegisterReflection(srv); err != nil {
		return err
	}
	metrics.InitializeMetrics(srv)
	for name := range srv.GetServiceInfo() {
		healthSrv.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}

	// gRPC, gRPC-Web and Connect on one port (http.go). Handlers mounted
	// beside the RPCs (such as a dashboard under "/ui/") go in routes.
	routes := httpRoutes{}
	if cfg.UI {
		// The dashboard: static files only; its data comes through the
		// RPCs above, under the same authentication and limits.
		routes["/ui/"] = ui.Handler("/ui/")
		// A browser pointed at the server lands on the dashboard.
		routes["GET /{$}"] = http.RedirectHandler("/ui/", http.StatusFound)
	}
	var gw *gateway.Gateway
	if cfg.Gateway {
		// The OpenAI- and Anthropic-compatible gateway: the same engine,
		// contextd's key in X-Contextd-Key (the provider's stays in
		// Authorization or x-api-key and is forwarded).
		gw = newGateway(cfg, eng, models, keys, domain, log)
		routes[gateway.Prefix] = gw
	}
	front, err := newFrontend(cfg, srv, routes, keys, reg, log)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.ListenAddr, err)
	}
	errc := make(chan error, 2)
	go func() { errc <- front.serve(lis) }()
	log.Info("serving", servingAttrs(lis.Addr(), cfg)...)

	var metricsSrv *http.Server
	if cfg.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		pprofOn := servePprof(mux, cfg.Pprof, cfg.MetricsAddr, cfg.AllowedHosts)
		var handler http.Handler = mux
		if !keys.Enabled() && loopback(cfg.MetricsAddr) {
			// Loopback metrics answer only loopback names, as the API does
			// without keys (hostguard.go): no page rebound to 127.0.0.1
			// reads them.
			handler = hostGuard{allowed: allowedHosts(cfg.MetricsAddr, cfg.AllowedHosts), next: mux}
		}
		metricsSrv = &http.Server{Addr: cfg.MetricsAddr, Handler: handler, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: cfg.HTTPIdleTimeout}
		mlis, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			_ = lis.Close()
			return fmt.Errorf("listen on %s: %w", cfg.MetricsAddr, err)
		}
		go func() {
			if err := metricsSrv.Serve(mlis); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics server: %w", err)
			}
		}()
		attrs := []any{"addr", mlis.Addr().String(), "metrics", baseURL(mlis.Addr(), false) + "/metrics"}
		if pprofOn {
			attrs = append(attrs, "pprof", baseURL(mlis.Addr(), false)+"/debug/pprof/")
		}
		log.Info("serving metrics", attrs...)
	}

	select {
	case <-ctx.Done():
	case err := <-errc:
		_ = front.srv.Close()
		srv.Stop()
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	// Kubernetes order: report NOT_SERVING first so no new calls arrive,
	// then drain, and cut what is left when the timeout passes. The drain is
	// the HTTP server's (GOAWAY, wait for open calls): grpc.Server's
	// GracefulStop would cancel calls served through ServeHTTP.
	healthSrv.Shutdown()
	hub.Close() // watch streams end with UNAVAILABLE, so the drain need not wait for them
	// Health's Watch streams send NOT_SERVING from their own goroutines; a
	// stream cancelled at once may end before it sends it (its select
	// picks either). They get a moment first.
	time.Sleep(notServingGrace)
	drain.start() // so do health's Watch and reflection streams
	sctx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	if !front.shutdown(sctx) {
		log.Warn("graceful stop timed out; closed open calls")
	}
	cancelDrain()
	if gw != nil {
		// Answers relayed are recorded before the store closes (each
		// recording's writes have their own 30 s deadline).
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 35*time.Second)
		gw.Wait(wctx)
		cancel()
	}
	srv.Stop()
	if metricsSrv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = metricsSrv.Shutdown(sctx)
	}
	log.Info("stopped")
	return nil
}

// OpenStore opens PostgreSQL when a database URL is configured, else the
// embedded SQLite database in the data directory; pending migrations are
// applied either way.
func OpenStore(ctx context.Context, cfg Config, log *slog.Logger) (store.Store, error) {
	if cfg.DatabaseURL != "" {
		s, err := postgres.Open(ctx, cfg.DatabaseURL)
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		log.Info("storage ready", "backend", "postgres")
		return s, nil
	}
	s, err := sqlite.Open(ctx, cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	log.Info("storage ready", "backend", "sqlite", "dir", cfg.DataDir)
	return s, nil
}

// summarizerEndpoints returns the LLM providers the configuration reaches:
// a provider is configured by its API key or its base URL (Ollama needs no
// key).
// newGateway builds the gateway; its rate limit is per tenant with the
// RPCs' settings, counted apart from them.
func newGateway(cfg Config, eng *engine.Engine, models *tokens.Registry, keys *auth.Keys, metrics *telemetry.Metrics, log *slog.Logger) *gateway.Gateway {
	var limiter *auth.RateLimiter
	if cfg.RateLimitRPS > 0 {
		limiter = auth.NewRateLimiter(cfg.RateLimitRPS, cfg.RateLimitBurst)
	}
	return gateway.New(gateway.Config{Engine: eng, Models: models, Keys: keys, Limiter: limiter,
		OpenAIBaseURL: cfg.OpenAIBaseURL, AnthropicBaseURL: cfg.AnthropicBaseURL,
		OpenAIAPIKey: cfg.OpenAIAPIKey, AnthropicAPIKey: cfg.AnthropicAPIKey, LendKeys: cfg.GatewayServerKeys,
		MaxBodyBytes: int64(cfg.MaxMessageBytes), MemoBytes: cfg.GatewayMemoBytes, StreamKeepalive: cfg.GatewayKeepalive, StreamWriteTimeout: cfg.StreamWriteTimeout, Metrics: metrics, Log: log})
}

func summarizerEndpoints(cfg Config) map[string]summarize.Endpoint {
	eps := map[string]summarize.Endpoint{}
	base := summarize.Endpoint{Timeout: cfg.SummarizerTimeout, MaxRetries: cfg.SummarizerMaxRetries}
	if cfg.OpenAIAPIKey != "" || cfg.OpenAIBaseURL != "" {
		ep := base
		ep.BaseURL, ep.APIKey = cfg.OpenAIBaseURL, cfg.OpenAIAPIKey
		eps[summarize.ProviderOpenAI] = ep
	}
	if cfg.AnthropicAPIKey != "" || cfg.AnthropicBaseURL != "" {
		ep := base
		ep.BaseURL, ep.APIKey = cfg.AnthropicBaseURL, cfg.AnthropicAPIKey
		eps[summarize.ProviderAnthropic] = ep
	}
	return eps
}

// newGRPCServer returns a server with the interceptor chain: metrics outermost
// (they see every outcome), then logging, then panic recovery (so a panic is
// logged and counted as Internal), then authentication (the tenant), the
// per-tenant rate limit, and validation next to the handler.
func newGRPCServer(cfg Config, log *slog.Logger, validator pvalidate.Validator, metrics *grpcprom.ServerMetrics, keys *auth.Keys, extra ...grpc.ServerOption) (*grpc.Server, error) {
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall), logging.WithFieldsFromContext(protocolField)}
	unary := []grpc.UnaryServerInterceptor{
		metrics.UnaryServerInterceptor(),
		logging.UnaryServerInterceptor(interceptorLogger(log), logOpts...),
		recovery.UnaryServerInterceptor(recovery.WithRecoveryHandlerContext(panicHandler(log))),
	}
	stream := []grpc.StreamServerInterceptor{
		metrics.StreamServerInterceptor(),
		logging.StreamServerInterceptor(interceptorLogger(log), logOpts...),
		recovery.StreamServerInterceptor(recovery.WithRecoveryHandlerContext(panicHandler(log))),
	}
	if keys.Enabled() {
		needsAuth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
			return !cfg.AuthExemptHealth || !strings.HasPrefix(c.Service, "grpc.")
		})
		unary = append(unary, selector.UnaryServerInterceptor(grpcauth.UnaryServerInterceptor(keys.AuthFunc), needsAuth))
		stream = append(stream, selector.StreamServerInterceptor(grpcauth.StreamServerInterceptor(keys.AuthFunc), needsAuth))
	}
	if cfg.RateLimitRPS > 0 {
		limiter := auth.NewRateLimiter(cfg.RateLimitRPS, cfg.RateLimitBurst)
		limited := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool { return !strings.HasPrefix(c.Service, "grpc.") })
		unary = append(unary, selector.UnaryServerInterceptor(ratelimit.UnaryServerInterceptor(limiter), limited))
		stream = append(stream, selector.StreamServerInterceptor(ratelimit.StreamServerInterceptor(limiter), limited))
		// Health Watch and reflection streams need no credentials, and a
		// stream holds the server longer than a call: they are limited per
		// caller address, as tenants are (health Check, which probes use,
		// is not).
		peers := auth.NewRateLimiter(cfg.RateLimitRPS, cfg.RateLimitBurst)
		open := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool { return strings.HasPrefix(c.Service, "grpc.") })
		stream = append(stream, selector.StreamServerInterceptor(ratelimit.StreamServerInterceptor(peerLimiter{peers}), open))
	}
	unary = append(unary, protovalidate.UnaryServerInterceptor(validator))
	stream = append(stream, protovalidate.StreamServerInterceptor(validator))
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxMessageBytes),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	}
	// The server is reached through ServeHTTP (http.go), where options about
	// connections and transport (credentials, keepalive, connection age,
	// MaxConcurrentStreams, InTapHandle) have no effect: those are the HTTP
	// server's, and a tap handle is given to newFrontend.
	return grpc.NewServer(append(opts, extra...)...), nil
}

// interceptorLogger adapts slog to go-grpc-middleware's logging interceptor.
// It logs call metadata only (method, code, duration), never payloads.
func interceptorLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

// panicHandler turns a panic in a handler into Internal and logs it; the
// process keeps serving.
func panicHandler(l *slog.Logger) recovery.RecoveryHandlerFuncContext {
	return func(ctx context.Context, p any) error {
		l.ErrorContext(ctx, "panic in handler", "panic", fmt.Sprint(p))
		return status.Error(codes.Internal, "internal error")
	}
}

// peerLimiter limits calls by the caller's address.
type peerLimiter struct{ l *auth.RateLimiter }

func (p peerLimiter) Limit(ctx context.Context) error {
	addr := "unknown"
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		addr = pr.Addr.String()
	}
	return p.l.Allow(auth.PeerKey(addr))
}
