package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(t.Context(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestLedgerSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	storetest.LedgerSurvivesReopen(t, func() store.Store {
		s, err := sqlite.Open(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func BenchmarkPurge(b *testing.B) {
	storetest.BenchPurge(b, func(b *testing.B) store.Store {
		s, err := sqlite.Open(b.Context(), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}

// TestOpenEscapesPath: a data directory whose name holds URI characters
// ('#', '?', '%', spaces) keeps its database inside it, not in a file named
// after the part of the path before them.
func TestOpenEscapesPath(t *testing.T) {
	for _, name := range []string{"a#b", "a?b=c", "a%20b", "a b", "ä&ö;"} {
		base := t.TempDir()
		dir := filepath.Join(base, name)
		s, err := sqlite.Open(t.Context(), dir)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		s.Close()
		if _, err := os.Stat(filepath.Join(dir, sqlite.FileName)); err != nil {
			t.Errorf("%q: the database is not in the data directory: %v", name, err)
		}
		entries, _ := os.ReadDir(base)
		if len(entries) != 1 {
			t.Errorf("%q: files outside the data directory: %v", name, entries)
		}
	}
}

func BenchmarkFindHistory(b *testing.B) {
	storetest.BenchFindHistory(b, func(b *testing.B) store.Store {
		s, err := sqlite.Open(b.Context(), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}
