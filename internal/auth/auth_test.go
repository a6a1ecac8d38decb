package auth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func line(id, tenant, key string, revoked bool) string {
	return fmt.Sprintf(`{"id":%q,"tenant":%q,"sha256":%q,"revoked":%v}`, id, tenant, Digest(key), revoked)
}

func write(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReloadFailsClosed: after a reload, whatever the file says is applied
// line by line; nothing broken keeps an old key working.
func TestReloadFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lines   []string // the file after the reload; nil: deleted
		refused []string // keys refused after it
		usable  []string // keys still accepted
		wantErr string
	}{
		{name: "revocation beside a broken line",
			lines:   []string{line("a", "acme", "k-a", true), "not json", line("b", "acme", "k-b", false)},
			refused: []string{"k-a"}, usable: []string{"k-b"}, wantErr: "line 2"},
		{name: "revocation with an unknown field still revokes",
			lines:   []string{`{"id":"a","tenant":"acme","sha256":"` + Digest("k-a") + `","revoked":true,"note":"left"}`, line("b", "acme", "k-b", false)},
			refused: []string{"k-a"}, usable: []string{"k-b"}, wantErr: "line 1"},
		{name: "a broken revocation followed by the key's valid line stays refused",
			lines:   []string{`{"id":"a","tenant":"acme","sha256":"` + Digest("k-a") + `","revoked":true,"reason":"leaked"}`, line("a", "acme", "k-a", false), line("b", "acme", "k-b", false)},
			refused: []string{"k-a"}, usable: []string{"k-b"}, wantErr: "line 1"},
		{name: "a revocation with a syntax error still revokes",
			lines:   []string{line("a", "acme", "k-a", false), `{"id":"a","tenant":"acme","sha256":"` + Digest("k-a") + `","revoked":true`, line("b", "acme", "k-b", false)},
			refused: []string{"k-a"}, usable: []string{"k-b"}, wantErr: "line 2"},
		{name: "a revoked key listed again unrevoked stays refused",
			lines:   []string{line("a", "acme", "k-a", true), line("a2", "acme", "k-a", false), line("b", "acme", "k-b", false)},
			refused: []string{"k-a"}, usable: []string{"k-b"}, wantErr: "already listed"},
		{name: "a duplicate digest does not move a key to another tenant",
			lines:   []string{line("a", "acme", "k-a", false), line("x", "globex", "k-a", false), line("b", "acme", "k-b", false)},
			refused: []string{"k-a"}, usable: []string{"k-b"}, wantErr: "already listed"},
		{name: "deleted file", lines: nil, refused: []string{"k-a", "k-b"}, wantErr: "no such file"},
		{name: "file of garbage", lines: []string{"{", "[]"}, refused: []string{"k-a", "k-b"}, wantErr: "line 1"},
		{name: "a line past the scanner's limit",
			lines:   []string{line("b", "acme", "k-b", false), strings.Repeat("x", 70_000)},
			refused: []string{"k-a", "k-b"}, wantErr: "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keys.jsonl")
			write(t, path, line("a", "acme", "k-a", false), line("b", "acme", "k-b", false))
			k, err := LoadKeys(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.lines == nil {
				os.Remove(path)
			} else {
				write(t, path, tc.lines...)
			}
			err = k.Reload()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Reload: %v, want an error saying %q", err, tc.wantErr)
			}
			for _, key := range tc.refused {
				if _, err := k.Authenticate(key); err == nil {
					t.Errorf("%s is still accepted", key)
				}
			}
			for _, key := range tc.usable {
				if got, err := k.Authenticate(key); err != nil || got.Tenant != "acme" {
					t.Errorf("%s: %v, %v", key, got, err)
				}
			}
		})
	}
}

// TestLoadKeysRefusesDuplicates: at start a digest listed twice (also
// between the file and CONTEXTD_API_KEYS) is an error.
func TestLoadKeysRefusesDuplicates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.jsonl")
	write(t, path, line("a", "acme", "k-a", false))
	if _, err := LoadKeys(path, []string{"globex:k-a"}); err == nil || !strings.Contains(err.Error(), "already listed") {
		t.Fatalf("LoadKeys: %v", err)
	}
}

// TestPairsSurviveAMissingFile: the CONTEXTD_API_KEYS pairs are not in the
// file, so removing the file does not revoke them.
func TestPairsSurviveAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.jsonl")
	write(t, path, line("a", "acme", "k-a", false))
	k, err := LoadKeys(path, []string{"globex:k-g"})
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := k.Reload(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Reload: %v", err)
	}
	if _, err := k.Authenticate("k-a"); err == nil {
		t.Error("a key of the deleted file is accepted")
	}
	if key, err := k.Authenticate("k-g"); err != nil || key.Tenant != "globex" {
		t.Errorf("k-g: %v, %v", key, err)
	}
}

// TestWatchWaitsForAnInPlaceWrite: a keys file rewritten in place (emptied,
// then written, as os.WriteFile and editors do) is read once it has
// settled: a key listed before and after the write is never refused in
// between, while the key the write revokes is refused after it.
func TestWatchWaitsForAnInPlaceWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.jsonl")
	write(t, path, line("a", "acme", "k-a", false), line("b", "acme", "k-b", false))
	k, err := LoadKeys(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go k.Watch(ctx, time.Millisecond, nil, func(error) {})
	stop := make(chan struct{})
	refusedB := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				refusedB <- nil
				return
			default:
			}
			if _, err := k.Authenticate("k-b"); err != nil {
				refusedB <- err
				return
			}
		}
	}()
	for range 3 {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the writer between emptying and writing
		if _, err := f.WriteString(line("a", "acme", "k-a", true) + "\n" + line("b", "acme", "k-b", false) + "\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := k.Authenticate("k-a"); errors.Is(err, ErrRevokedKey) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	if err := <-refusedB; err != nil {
		t.Errorf("k-b, listed before and after the write, was refused while it was written: %v", err)
	}
	if _, err := k.Authenticate("k-a"); !errors.Is(err, ErrRevokedKey) {
		t.Errorf("k-a after its revocation was written: %v", err)
	}
}

// TestWatchReadsAFileThatNeverSettles: a keys file replaced every 60 ms (a
// sync agent) never stays unchanged for the settle time; a revocation
// written into it still applies, within about a second.
func TestWatchReadsAFileThatNeverSettles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.jsonl")
	write(t, path, line("a", "acme", "k-a", false))
	k, err := LoadKeys(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go k.Watch(ctx, 10*time.Millisecond, nil, func(error) {})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(60 * time.Millisecond):
			}
			tmp := path + ".tmp"
			// Each version differs in size, so every one is a change.
			_ = os.WriteFile(tmp, []byte(line("a", "acme", "k-a", true)+"\n"+strings.Repeat("#\n", i%7)), 0o600)
			_ = os.Rename(tmp, path)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := k.Authenticate("k-a"); errors.Is(err, ErrRevokedKey) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a revocation in a file that keeps changing was never applied")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
