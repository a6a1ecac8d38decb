// Package auth owns who a caller is: API keys presented as bearer tokens,
// stored only as SHA-256 digests and mapped to tenants, and the tenant that
// every request is scoped by.
package auth

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultTenant is every caller's tenant when authentication is off.
const DefaultTenant = "default"

type tenantKey struct{}

// WithTenant returns ctx carrying tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantFrom returns the caller's tenant (DefaultTenant without auth).
func TenantFrom(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok && t != "" {
		return t
	}
	return DefaultTenant
}

// Key is one API key of the keys file, as a digest.
type Key struct {
	ID      string `json:"id"`      // a name for logs and audits, never the key
	Tenant  string `json:"tenant"`  // the tenant the key acts for
	SHA256  string `json:"sha256"`  // hex digest of the key
	Revoked bool   `json:"revoked"` // a revoked key is refused
}

// Digest returns the hex SHA-256 of a key, as the keys file stores it.
func Digest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Keys authenticates bearer tokens.
type Keys struct {
	byDigest map[string]Key
}

// Errors of Authenticate; both become Unauthenticated.
var (
	ErrUnknownKey = errors.New("invalid API key")
	ErrRevokedKey = errors.New("API key revoked")
)

// LoadKeys reads a keys file (JSON lines, one Key each; blank lines and
// lines starting with # are skipped) and adds plaintext keys given as
// "tenant:key" pairs (CONTEXTD_API_KEYS), hashed at once.
func LoadKeys(file string, pairs []string) (*Keys, error) {
	k := &Keys{byDigest: map[string]Key{}}
	add := func(key Key, where string) error {
		if key.Tenant == "" || len(key.SHA256) != 64 {
			return fmt.Errorf("%s: a key needs a tenant and a 64-hex-digit sha256", where)
		}
		if _, err := hex.DecodeString(key.SHA256); err != nil {
			return fmt.Errorf("%s: sha256 is not hex", where)
		}
		k.byDigest[strings.ToLower(key.SHA256)] = key
		return nil
	}
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("keys file: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			var key Key
			dec := json.NewDecoder(strings.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&key); err != nil {
				return nil, fmt.Errorf("keys file line %d: %w", n, err)
			}
			if err := add(key, fmt.Sprintf("keys file line %d", n)); err != nil {
				return nil, err
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("keys file: %w", err)
		}
	}
	for i, p := range pairs {
		tenant, key, ok := strings.Cut(strings.TrimSpace(p), ":")
		if !ok || tenant == "" || key == "" {
			return nil, fmt.Errorf("CONTEXTD_API_KEYS entry %d: want tenant:key", i+1)
		}
		if err := add(Key{ID: fmt.Sprintf("env-%d", i+1), Tenant: tenant, SHA256: Digest(key)}, "CONTEXTD_API_KEYS"); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// Enabled reports whether any key is configured (otherwise auth is off).
func (k *Keys) Enabled() bool { return k != nil && len(k.byDigest) > 0 }

// Authenticate maps a bearer token to its key.
func (k *Keys) Authenticate(token string) (Key, error) {
	key, ok := k.byDigest[Digest(token)]
	switch {
	case !ok:
		return Key{}, ErrUnknownKey
	case key.Revoked:
		return Key{}, ErrRevokedKey
	}
	return key, nil
}

// AuthFunc is the go-grpc-middleware auth function: it reads the bearer
// token and puts the caller's tenant in the context.
func (k *Keys) AuthFunc(ctx context.Context) (context.Context, error) {
	token, err := grpcauth.AuthFromMD(ctx, "bearer")
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, "missing credentials: send \"authorization: Bearer <API key>\"")
	}
	key, err := k.Authenticate(token)
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	return WithTenant(ctx, key.Tenant), nil
}

// RateLimiter limits each tenant to a steady rate with a burst, for
// go-grpc-middleware's ratelimit interceptor. Limiters of tenants idle for
// ten minutes are dropped.
type RateLimiter struct {
	rps   rate.Limit
	burst int
	mu    sync.Mutex
	per   map[string]*tenantLimiter
	swept time.Time
}

type tenantLimiter struct {
	l    *rate.Limiter
	seen time.Time
}

// NewRateLimiter allows rps requests a second per tenant, with bursts.
func NewRateLimiter(rps float64, burst int) *RateLimiter {
	return &RateLimiter{rps: rate.Limit(rps), burst: burst, per: map[string]*tenantLimiter{}}
}

// Limit implements ratelimit.Limiter.
func (r *RateLimiter) Limit(ctx context.Context) error {
	tenant := TenantFrom(ctx)
	now := time.Now()
	r.mu.Lock()
	tl, ok := r.per[tenant]
	if !ok {
		tl = &tenantLimiter{l: rate.NewLimiter(r.rps, r.burst)}
		r.per[tenant] = tl
	}
	tl.seen = now
	if now.Sub(r.swept) > time.Minute {
		for t, x := range r.per {
			if now.Sub(x.seen) > 10*time.Minute {
				delete(r.per, t)
			}
		}
		r.swept = now
	}
	r.mu.Unlock()
	if !tl.l.AllowN(now, 1) {
		return fmt.Errorf("tenant %q is over its rate limit of %g requests a second (burst %d)", tenant, float64(r.rps), r.burst)
	}
	return nil
}
