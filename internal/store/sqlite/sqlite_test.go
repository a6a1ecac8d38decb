package sqlite_test

import (
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
