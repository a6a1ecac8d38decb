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
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
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

	refused string // why a key is refused besides revocation (not in the file)
}

// Digest returns the hex SHA-256 of a key, as the keys file stores it.
func Digest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Keys authenticates bearer tokens. The keys come from a file and/or
// "tenant:key" pairs and are swapped atomically by Reload (on SIGHUP, or
// when Watch sees the file change), so a revoked key is refused without a
// restart. It is safe for concurrent use; Authenticate costs one SHA-256 of
// the token and one map lookup, and takes no lock.
type Keys struct {
	on       bool
	file     string
	pairs    []string
	byDigest atomic.Pointer[map[string]Key]
	mu       sync.Mutex // serializes reloads
	stamp    fileStamp
}

// fileStamp is what Watch compares to notice a changed keys file.
type fileStamp struct {
	mod  time.Time
	size int64
}

// Errors of Authenticate; both become Unauthenticated.
var (
	ErrUnknownKey = errors.New("invalid API key")
	ErrRevokedKey = errors.New("API key revoked")
)

// Off returns keys that switch authentication off: every caller is
// DefaultTenant.
func Off() *Keys { return &Keys{} }

// LoadKeys reads a keys file (JSON lines, one Key each; blank lines and
// lines starting with # are skipped) and adds plaintext keys given as
// "tenant:key" pairs (CONTEXTD_API_KEYS), hashed at once. Authentication
// is then on; keys configured but holding no usable key (an empty file, a
// file of comments, only revoked keys) are an error, never a silent
// switch to no authentication. At start any bad line is an error.
func LoadKeys(file string, pairs []string) (*Keys, error) {
	k := &Keys{on: true, file: file, pairs: pairs}
	m, stamp, err := k.read()
	if err != nil {
		return nil, err
	}
	if usable(m) == 0 {
		where := "CONTEXTD_API_KEYS"
		if file != "" {
			where = "the keys file " + file
		}
		return nil, fmt.Errorf("%s holds no usable API key: add one ({\"id\":..,\"tenant\":..,\"sha256\":..} per line), or run without authentication explicitly with CONTEXTD_AUTH=off", where)
	}
	k.byDigest.Store(&m)
	k.stamp = stamp
	return k, nil
}

func usable(m map[string]Key) int {
	n := 0
	for _, key := range m {
		if !key.Revoked {
			n++
		}
	}
	return n
}

// read parses the configured keys, line by line. It always returns the keys
// that are in force, failing closed: a line that does not parse grants
// nothing (and when a sha256 can still be read from it, that digest is
// refused, as a revocation with a typo must still revoke); a digest listed
// twice is refused whatever either line says (it would otherwise move a key
// to another tenant); a missing or unreadable file grants no key (only the
// CONTEXTD_API_KEYS pairs, fixed for the life of the process, stay). The
// error joins everything that went wrong.
func (k *Keys) read() (map[string]Key, fileStamp, error) {
	m := map[string]Key{}
	where := map[string]string{} // digest -> the line that listed it first
	var stamp fileStamp
	var errs []error
	// Refusals apply after every line is read, so no other line (a valid
	// one listing the same digest after a broken one) can undo them.
	refusals := map[string]string{}
	refuse := func(digest, reason string) {
		if _, done := refusals[digest]; !done {
			refusals[digest] = reason
		}
	}
	add := func(key Key, line string) {
		if key.Tenant == "" || len(key.SHA256) != 64 {
			errs = append(errs, fmt.Errorf("%s: a key needs a tenant and a 64-hex-digit sha256", line))
			if len(key.SHA256) == 64 {
				refuse(strings.ToLower(key.SHA256), "its line in the keys file is invalid")
			}
			return
		}
		if _, err := hex.DecodeString(key.SHA256); err != nil {
			errs = append(errs, fmt.Errorf("%s: sha256 is not hex", line))
			return
		}
		digest := strings.ToLower(key.SHA256)
		if first, dup := where[digest]; dup {
			errs = append(errs, fmt.Errorf("%s: sha256 is already listed by %s; a key is listed once, the key is refused until one line is removed", line, first))
			refuse(digest, "its digest is listed more than once")
			return
		}
		where[digest] = line
		key.SHA256 = digest
		m[digest] = key
	}
	if k.file != "" {
		if err := k.readFile(&stamp, add, refuse); err != nil {
			errs = append(errs, err)
		}
	}
	for i, p := range k.pairs {
		tenant, key, ok := strings.Cut(strings.TrimSpace(p), ":")
		if !ok || tenant == "" || key == "" {
			errs = append(errs, fmt.Errorf("CONTEXTD_API_KEYS entry %d: want tenant:key", i+1))
			continue
		}
		add(Key{ID: fmt.Sprintf("env-%d", i+1), Tenant: tenant, SHA256: Digest(key)}, fmt.Sprintf("CONTEXTD_API_KEYS entry %d", i+1))
	}
	for digest, reason := range refusals {
		m[digest] = Key{ID: m[digest].ID, Tenant: m[digest].Tenant, SHA256: digest, Revoked: true, refused: reason}
	}
	return m, stamp, errors.Join(errs...)
}

// hexDigest finds the SHA-256 digests a line names.
var hexDigest = regexp.MustCompile(`\b[0-9a-fA-F]{64}\b`)

// readFile reads the keys file line by line into add; a line that does not
// parse is reported, and the digest it names, if any can be read, refused.
func (k *Keys) readFile(stamp *fileStamp, add func(Key, string), refuse func(string, string)) error {
	f, err := os.Open(k.file)
	if err != nil {
		return fmt.Errorf("keys file: %w (no key of the file is accepted until it is back)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		*stamp = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	type parsed struct {
		key  Key
		line string
	}
	var keys []parsed
	var errs []error
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
			errs = append(errs, fmt.Errorf("keys file line %d: %w", n, err))
			// Every digest the broken line names is refused, however it
			// is broken (a revocation with a missing quote must still
			// revoke).
			for _, d := range hexDigest.FindAllString(line, -1) {
				refuse(strings.ToLower(d), "its line in the keys file is invalid")
			}
			continue
		}
		keys = append(keys, parsed{key, fmt.Sprintf("keys file line %d", n)})
	}
	if err := sc.Err(); err != nil {
		// A line past the scanner's limit: what follows it is unread, so
		// no key of the file is trusted (refusals read so far still apply).
		return fmt.Errorf("keys file: %w (no key of the file is accepted until it is fixed)", err)
	}
	for _, p := range keys {
		add(p.key, p.line)
	}
	return errors.Join(errs...)
}

// Reload reads the keys again and swaps them in, failing closed: what the
// file says is applied line by line, so a revocation takes effect even when
// other lines are broken (a broken line grants nothing), a missing file
// leaves no key of the file usable, and a file that parses but holds no
// usable key refuses every call. Reload returns what went wrong. Keys that
// are off stay off.
func (k *Keys) Reload() error {
	if !k.Enabled() {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	m, stamp, err := k.read()
	k.byDigest.Store(&m)
	k.stamp = stamp
	if err != nil {
		return fmt.Errorf("keys reloaded with errors, failing closed (a broken line grants nothing, a revocation still applies): %w", err)
	}
	return nil
}

// changed reports whether the keys file differs from the one last read.
func (k *Keys) changed() bool {
	if k.file == "" {
		return false
	}
	fi, err := os.Stat(k.file)
	if err != nil {
		return true // gone or unreadable: Reload reports it
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return fi.ModTime() != k.stamp.mod || fi.Size() != k.stamp.size
}

// keysSettle is how long a changed keys file must stay unchanged before it
// is read: an editor or a script that rewrites the file in place empties
// it first, and reading it then would refuse every key until the next
// check (a write that takes longer than keysSettle still can: replace the
// file by a rename, which is atomic). A file that keeps changing is read
// after keysSettleMax (or the check interval, if longer) all the same.
const (
	keysSettle    = 100 * time.Millisecond
	keysSettleMax = time.Second
)

// settled reports whether the keys file stays as it is for keysSettle; a
// file still being written is read at a later check.
func (k *Keys) settled(ctx context.Context) bool {
	before, err := os.Stat(k.file)
	if err != nil {
		return true // gone or unreadable: Reload reports it
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(keysSettle):
	}
	after, err := os.Stat(k.file)
	return err != nil || after.ModTime() == before.ModTime() && after.Size() == before.Size()
}

// Watch reloads the keys whenever the keys file changes (checked every
// interval, a stat each time, and read once it has settled) or a signal
// arrives on hup, until ctx ends.
// Reload errors are passed to report.
func (k *Keys) Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal, report func(error)) {
	if !k.Enabled() {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	var unsettled time.Time // when a change still being written was first seen
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-t.C:
			if !k.changed() {
				unsettled = time.Time{}
				continue
			}
			if !k.settled(ctx) {
				// A file that never settles (rewritten continuously) is
				// read all the same after a while: a revocation in it
				// must not wait for ever.
				if unsettled.IsZero() {
					unsettled = time.Now()
				}
				if time.Since(unsettled) < max(interval, keysSettleMax) {
					continue
				}
			}
		}
		unsettled = time.Time{}
		err := k.Reload()
		if err != nil && (last == nil || err.Error() != last.Error()) {
			report(err)
		}
		last = err
	}
}

// Enabled reports whether authentication is on.
func (k *Keys) Enabled() bool { return k != nil && k.on }

// Count returns how many keys are in force (revoked ones included).
func (k *Keys) Count() int {
	if !k.Enabled() {
		return 0
	}
	return len(*k.byDigest.Load())
}

// Authenticate maps a bearer token to its key. It is cheap (one SHA-256
// and a map lookup, no lock), so any layer can call it before doing work.
func (k *Keys) Authenticate(token string) (Key, error) {
	key, ok := (*k.byDigest.Load())[Digest(token)]
	switch {
	case !ok:
		return Key{}, ErrUnknownKey
	case key.refused != "":
		return Key{}, fmt.Errorf("%w: %s", ErrRevokedKey, key.refused)
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

// Limit implements ratelimit.Limiter: one limiter per tenant.
func (r *RateLimiter) Limit(ctx context.Context) error {
	return r.Allow(TenantFrom(ctx))
}

// Allow takes one request from key's limiter (a tenant, or for calls made
// without credentials the caller's address).
func (r *RateLimiter) Allow(tenant string) error {
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
		return fmt.Errorf("%s is over its rate limit of %g requests a second (burst %d)", describeKey(tenant), float64(r.rps), r.burst)
	}
	return nil
}

// PeerKey is the rate-limit key of a call made without credentials (health
// and reflection): its address, without the port.
func PeerKey(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	return "peer:" + addr
}

func describeKey(key string) string {
	if addr, ok := strings.CutPrefix(key, "peer:"); ok {
		return fmt.Sprintf("address %s", addr)
	}
	return fmt.Sprintf("tenant %q", key)
}
