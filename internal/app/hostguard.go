package app

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Without API keys a server on loopback is open to every program of the
// host, and to every web page its browser opens: a page of attacker.example
// whose name is rebound to 127.0.0.1 is same-origin with itself, so CORS
// does not stop it from calling the API (DNS rebinding). What gives such a
// request away is its Host (HTTP/1.1) or :authority (HTTP/2), which names
// the attacker's host. So without keys only loopback names, the listen
// host and CONTEXTD_ALLOWED_HOSTS are served, whatever the port, on every
// protocol and route of the listener. With keys the check is off: a page
// cannot send a key it does not have.

// hostGuard wraps next so that, when allowed is not nil, a request whose
// Host is not in it is refused with PermissionDenied in the caller's
// protocol (gRPC trailers, Connect JSON, HTTP 403).
type hostGuard struct {
	allowed map[string]bool // nil: every host
	next    http.Handler
}

// allowedHosts is the set of Host names served without authentication for a
// listener on listenAddr, nil when any is (CONTEXTD_ALLOWED_HOSTS=*).
func allowedHosts(listenAddr string, extra []string) map[string]bool {
	m := map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	if host, _, err := net.SplitHostPort(listenAddr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			m[canonicalHost(host)] = true
		}
	}
	for _, h := range extra {
		if h == "*" {
			return nil
		}
		m[canonicalHost(h)] = true
	}
	return m
}

// canonicalHost is host without port, brackets and a trailing dot, in lower
// case: "LocalHost.:50051" and "localhost" are one name, "[::1]:80" is ::1.
func canonicalHost(host string) string {
	if h, port, err := net.SplitHostPort(host); err == nil {
		if strings.Trim(port, "0123456789") != "" {
			return "" // not a port: no name of ours
		}
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

func (g hostGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.allowed == nil || g.allowed[canonicalHost(r.Host)] {
		g.next.ServeHTTP(w, r)
		return
	}
	msg := fmt.Sprintf("host %q is not served without authentication (DNS rebinding guard): call localhost, 127.0.0.1 or [::1], add the name to CONTEXTD_ALLOWED_HOSTS, or configure API keys", r.Host)
	switch protocolOf(r) {
	case protocolGRPC:
		h := w.Header()
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", "7") // PermissionDenied
		h.Set("Grpc-Message", grpcMessage(msg))
		w.WriteHeader(http.StatusOK)
	case protocolConnect:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		body, _ := json.Marshal(map[string]string{"code": "permission_denied", "message": msg})
		_, _ = w.Write(body)
	default: // gRPC-Web clients read 403 as PermissionDenied; pages see the text
		http.Error(w, msg, http.StatusForbidden)
	}
}
