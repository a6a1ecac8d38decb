package postgres_test

import (
	"testing"

	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/postgres"
	"github.com/contextd/contextd/internal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(t.Context(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestLedgerSurvivesReopen(t *testing.T) {
	url := pgtest.URL(t)
	storetest.LedgerSurvivesReopen(t, func() store.Store {
		s, err := postgres.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func BenchmarkPurge(b *testing.B) {
	storetest.BenchPurge(b, func(b *testing.B) store.Store {
		s, err := postgres.Open(b.Context(), pgtest.URL(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}
