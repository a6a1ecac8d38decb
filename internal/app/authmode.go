package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/contextd/contextd/internal/auth"
)

// LoadAuth decides whether the server authenticates, from CONTEXTD_AUTH:
//   - "on": API keys are required (CONTEXTD_API_KEYS_FILE and/or
//     CONTEXTD_API_KEYS, holding at least one usable key);
//   - "off": no authentication, every caller is tenant "default" (logged
//     at error level at every start);
//   - "auto" (the default): "on" when keys are configured; with none, off
//     only when the server listens on a loopback address (the quickstart,
//     CONTEXTD_LISTEN_ADDR=localhost:50051 by default), otherwise it
//     refuses to start.
//
// Keys configured but holding no usable key are always an error: the
// server never switches authentication off by itself.
func LoadAuth(cfg Config, log *slog.Logger) (*auth.Keys, error) {
	configured := cfg.APIKeysFile != "" || len(cfg.APIKeys) > 0
	switch {
	case cfg.Auth == "off":
		log.Error("authentication is OFF (CONTEXTD_AUTH=off): every caller is tenant \"default\" and can read and change every session; never expose this server", "listen_addr", cfg.ListenAddr)
		return auth.Off(), nil
	case configured:
		keys, err := auth.LoadKeys(cfg.APIKeysFile, cfg.APIKeys)
		if err != nil {
			return nil, fmt.Errorf("authentication: %w", err)
		}
		log.Info("authentication is on", "keys", keys.Count())
		return keys, nil
	case cfg.Auth == "on":
		return nil, fmt.Errorf("authentication: CONTEXTD_AUTH=on but no API keys are configured: set CONTEXTD_API_KEYS_FILE (or CONTEXTD_API_KEYS)")
	case !loopback(cfg.ListenAddr):
		return nil, fmt.Errorf("authentication: no API keys are configured and CONTEXTD_LISTEN_ADDR %q is reachable from other hosts: set CONTEXTD_API_KEYS_FILE (or CONTEXTD_API_KEYS), listen on a loopback address, or set CONTEXTD_AUTH=off to serve without authentication", cfg.ListenAddr)
	}
	log.Warn("authentication is off: no API keys are configured and the server listens on loopback only; every caller is tenant \"default\" (set CONTEXTD_API_KEYS_FILE before listening on other addresses)", "listen_addr", cfg.ListenAddr)
	return auth.Off(), nil
}

// loopback reports whether a listen address accepts connections from this
// host only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// watchKeys reloads keys on SIGHUP and when the keys file changes, until
// ctx ends.
func watchKeys(ctx context.Context, cfg Config, keys *auth.Keys, log *slog.Logger) {
	if !keys.Enabled() {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		keys.Watch(ctx, cfg.KeysReloadInterval, hup, func(err error) {
			log.Error("api keys reload failed", "error", err)
		})
	}()
}
