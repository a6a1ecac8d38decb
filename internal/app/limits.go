package app

import (
	"context"
	"net/http"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"

	"github.com/contextd/contextd/internal/auth"
)

// http2Limits bounds what one HTTP/2 connection may have open at once:
// CONTEXTD_MAX_CONCURRENT_STREAMS calls (each buffering at most
// CONTEXTD_MAX_MESSAGE_BYTES once its body is read).
func http2Limits(cfg Config) *http.HTTP2Config {
	return &http.HTTP2Config{MaxConcurrentStreams: cfg.MaxConcurrentStreams}
}

// authTap refuses an RPC whose credentials do not authenticate from its
// headers, before its body is read: an unauthenticated client can make the
// server buffer no more than HTTP/2 flow control lets it send before the
// answer (1 MB), instead of a whole request of up to
// CONTEXTD_MAX_MESSAGE_BYTES decoded before the auth interceptor runs. The
// interceptor still runs on every call (it puts the tenant in the context);
// this is the same check (keys.AuthFunc), done earlier. The frontend runs it
// on every protocol (http.go: tapped), and vanguard answers a refusal in the
// caller's protocol. Nil when authentication is off.
func authTap(keys *auth.Keys, exemptHealth bool) tap.ServerInHandle {
	if !keys.Enabled() {
		return nil
	}
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		service, _, _ := strings.Cut(strings.TrimPrefix(info.FullMethodName, "/"), "/")
		if exemptHealth && strings.HasPrefix(service, "grpc.") {
			return ctx, nil
		}
		if _, err := keys.AuthFunc(metadata.NewIncomingContext(ctx, metadata.MD{"authorization": info.Header.Get("authorization")})); err != nil {
			return nil, err
		}
		return ctx, nil
	}
}
