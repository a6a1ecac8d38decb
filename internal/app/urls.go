package app

import (
	"net"

	"github.com/contextd/contextd/internal/gateway"
)

// baseURL is where a person reaches a listener: its address, with a
// wildcard host (":50051", "0.0.0.0", "::") shown as localhost.
func baseURL(addr net.Addr, tls bool) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		host, port = addr.String(), ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	if port == "" {
		return scheme + "://" + host
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// servingAttrs are the startup log's attributes: the address, the version,
// and the URLs of the API, the dashboard and the gateway when they are on.
func servingAttrs(addr net.Addr, cfg Config) []any {
	base := baseURL(addr, cfg.TLSCertFile != "")
	attrs := []any{"addr", addr.String(), "version", Version(), "protocols", "grpc,grpc-web,connect",
		"tls", cfg.TLSCertFile != "", "api", base}
	if cfg.UI {
		attrs = append(attrs, "dashboard", base+"/ui/")
	}
	if cfg.Gateway {
		attrs = append(attrs, "gateway", base+gateway.Prefix)
	}
	return attrs
}
