package app

import (
	"net/http"
	"net/http/pprof"
	"runtime"
)

// Profiling a slow replica: /debug/pprof (Go's net/http/pprof) on the
// metrics listener, never on the API's. CONTEXTD_PPROF says when:
// "loopback" (the default) serves it only when the metrics address is a
// loopback one (as it is by default), "on" on any metrics address (a
// profile request costs CPU and shows the program's stacks: keep such a
// listener off the public network), "off" never. On loopback the DNS
// rebinding guard (hostguard.go) always applies to it, with or without
// API keys: a web page rebound to 127.0.0.1 cannot read the profiles.
// /debug/pprof/cmdline is not served: the command line may carry secrets
// (--api-keys, --database-url, --openai-api-key are flags too), and no
// profile needs it.

// Sampling of the block and mutex profiles while pprof is served: one
// blocking event in blockProfileNanos of time blocked (longer waits are all
// recorded), one contended unlock in mutexProfileFraction. Their cost is a
// few samples per millisecond of waiting; off (0), both profiles are empty.
const (
	blockProfileNanos    = 10_000 // 10 µs
	mutexProfileFraction = 100
)

// pprofModes are CONTEXTD_PPROF's values.
var pprofModes = []string{"loopback", "on", "off"}

// servePprof adds /debug/pprof/ to the metrics mux when mode allows it on
// metricsAddr, and turns on block and mutex sampling; it reports whether it
// did.
func servePprof(mux *http.ServeMux, mode, metricsAddr string, allowedExtra []string) bool {
	onLoopback := loopback(metricsAddr)
	if mode == "off" || (mode == "loopback" && !onLoopback) {
		return false
	}
	profiles := http.NewServeMux()
	profiles.HandleFunc("/debug/pprof/", pprof.Index) // heap, goroutine, block, mutex, allocs, threadcreate
	profiles.HandleFunc("/debug/pprof/profile", pprof.Profile)
	profiles.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	profiles.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var h http.Handler = profiles
	if onLoopback {
		h = hostGuard{allowed: allowedHosts(metricsAddr, allowedExtra), next: profiles}
	}
	mux.Handle("/debug/pprof/", h)
	runtime.SetBlockProfileRate(blockProfileNanos)
	runtime.SetMutexProfileFraction(mutexProfileFraction)
	return true
}
