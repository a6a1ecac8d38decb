package app

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// BenchmarkJSONAdmit is the cost of the JSON scan (admitjson.go) on an
// ordinary append — 200 messages of 500 bytes of text each, about 120 KB —
// beside protojson's decoding of the same body, which every such call pays
// after it: go test -run '^$' -bench BenchmarkJSONAdmit ./internal/app/
func BenchmarkJSONAdmit(b *testing.B) {
	srv := grpc.NewServer()
	contextdv1.RegisterContextServiceServer(srv, contextdv1.UnimplementedContextServiceServer{})
	caps := newBodyCaps(srv, Config{MaxMessageBytes: 16 << 20})
	var sb strings.Builder
	sb.WriteString(`{"sessionId": "s", "messages": [`)
	for i := range 200 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"role": "ROLE_USER", "parts": [{"text": {"text": %q}}]}`, strings.Repeat("word ", 100))
	}
	sb.WriteString("]}")
	body := []byte(sb.String())
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if err := caps.checkJSON(body, "contextd.v1.AppendMessagesRequest"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var req contextdv1.AppendMessagesRequest
			if err := protojson.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
