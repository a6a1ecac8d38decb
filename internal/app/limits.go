package app

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/contextd/contextd/internal/auth"
)

// http2Limits bounds what one HTTP/2 connection may have open at once:
// CONTEXTD_MAX_CONCURRENT_STREAMS calls (each buffering at most
// CONTEXTD_MAX_MESSAGE_BYTES once its body is read).
func http2Limits(cfg Config) *http.HTTP2Config {
	return &http.HTTP2Config{MaxConcurrentStreams: cfg.MaxConcurrentStreams}
}

// earlyAuth refuses an RPC whose credentials do not authenticate from its
// headers, before its body is read: an unauthenticated client can make the
// server buffer no more than HTTP/2 flow control lets it send before the
// answer (1 MB), instead of a whole request of up to
// CONTEXTD_MAX_MESSAGE_BYTES decoded before the auth interceptor runs. The
// interceptor still runs on every call (it puts the tenant in the context);
// this is the same check (keys.AuthFunc), done earlier, and answered in the
// caller's protocol (gRPC, gRPC-Web, Connect).
func earlyAuth(keys *auth.Keys, exemptHealth bool, next http.Handler) http.Handler {
	if !keys.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto := protocolOf(r)
		service, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if proto == protocolHTTP || r.Method == http.MethodOptions || (exemptHealth && strings.HasPrefix(service, "grpc.")) {
			next.ServeHTTP(w, r)
			return
		}
		md := metadata.MD{"authorization": r.Header.Values("Authorization")}
		if _, err := keys.AuthFunc(metadata.NewIncomingContext(r.Context(), md)); err != nil {
			writeRPCError(w, r, proto, status.Convert(err))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// connectCodes are the Connect names of the codes earlyAuth answers with.
var connectCodes = map[codes.Code]string{codes.Unauthenticated: "unauthenticated", codes.PermissionDenied: "permission_denied"}

// writeRPCError answers r with st, without reading its body, as its
// protocol expects: a trailers-only gRPC or gRPC-Web response, a Connect
// unary error (HTTP 401 with a JSON body), or a Connect stream holding only
// the end-of-stream message.
func writeRPCError(w http.ResponseWriter, r *http.Request, proto string, st *status.Status) {
	h := w.Header()
	ct := r.Header.Get("Content-Type")
	code, ok := connectCodes[st.Code()]
	if !ok {
		code = "unknown"
	}
	connectErr := map[string]string{"code": code, "message": st.Message()}
	switch {
	case proto == protocolGRPC || proto == protocolGRPCWeb:
		h.Set("Content-Type", ct)
		h.Set("Grpc-Status", strconv.Itoa(int(st.Code())))
		h.Set("Grpc-Message", url.PathEscape(st.Message()))
		w.WriteHeader(http.StatusOK)
	case strings.HasPrefix(ct, "application/connect+"):
		h.Set("Content-Type", ct)
		w.WriteHeader(http.StatusOK)
		body, _ := json.Marshal(map[string]any{"error": connectErr})
		var prefix [5]byte
		prefix[0] = 0x02 // end of stream
		binary.BigEndian.PutUint32(prefix[1:], uint32(len(body)))
		_, _ = w.Write(append(prefix[:], body...))
	default: // Connect unary
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(connectErr)
	}
}
