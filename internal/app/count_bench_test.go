package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/tokens"
)

// corpusText returns at least n bytes of real agent transcripts (the JSON
// lines of testdata/corpus/dev, repeated as needed).
func corpusText(tb testing.TB, n int) string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "corpus", "dev", "*.jsonl"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no corpus in testdata/corpus/dev: %v", err)
	}
	var sb strings.Builder
	for sb.Len() < n {
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			sb.Write(b)
			if sb.Len() >= n {
				break
			}
		}
	}
	return sb.String()[:n]
}

// BenchmarkCountTokens3MB counts the same 3 MB of transcript text in process
// (engine.CountTokens) and through the real server over gRPC on loopback, in
// one run, and reports both throughputs and their ratio (grpc/in-process).
func BenchmarkCountTokens3MB(b *testing.B) {
	text := corpusText(b, 3<<20)
	encodings := tokens.NewEncodings()
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(encodings, models, nil)
	client := contextdv1.NewContextServiceClient(startServer(b, map[string]string{}))
	ctx := b.Context()
	in := engine.CountInput{Encoding: tokens.O200KBase, Text: text}
	req := &contextdv1.CountTokensRequest{Encoding: tokens.O200KBase, Text: text}
	// Warm both paths (vocabulary load, connection, buffers).
	want, err := eng.CountTokens(ctx, in)
	if err != nil {
		b.Fatal(err)
	}
	if resp, err := client.CountTokens(ctx, req); err != nil || resp.GetTotalTokens() != want.Total {
		b.Fatalf("grpc count %d, %v; in process %d", resp.GetTotalTokens(), err, want.Total)
	}
	var local, remote time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := eng.CountTokens(ctx, in); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := client.CountTokens(ctx, req); err != nil {
			b.Fatal(err)
		}
		local, remote = local+t1.Sub(t0), remote+time.Since(t1)
	}
	mb := float64(len(text)) * float64(b.N) / 1e6
	b.ReportMetric(mb/local.Seconds(), "inproc-MB/s")
	b.ReportMetric(mb/remote.Seconds(), "grpc-MB/s")
	b.ReportMetric(local.Seconds()/remote.Seconds(), "grpc/inproc")
}
