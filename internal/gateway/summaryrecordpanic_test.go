package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/store"
)

// TestSummaryRecordPanicEndsOneRecord: a summary's record runs in a
// goroutine of its own (rememberSummary, its wait bounded), so a panic in
// it is not the request's, which net/http recovers: unrecovered, it ended
// the whole process, every tenant's requests with it (this test's binary
// crashes without the recover). Recovered, it is logged, the answer goes
// on at once, and Wait does not wait for it. The engine here is nil, the
// simplest store call that panics.
func TestSummaryRecordPanicEndsOneRecord(t *testing.T) {
	var logs lockedBuffer
	g := New(Config{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	reply := []chat.Message{{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText,
		Text: "<state_snapshot>" + strings.Repeat("every file was read; ", 8) + "</state_snapshot>"}}}}
	at := time.Now()
	g.rememberSummary(context.Background(), "t", "s", store.SummaryRecord{}, reply)
	if took := time.Since(at); took >= summaryRecordWait {
		t.Errorf("a record that panicked held the answer %v, its bound %v", took, summaryRecordWait)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatal("Wait waited out its context for a record that panicked")
	}
	if !strings.Contains(logs.String(), "panicked") {
		t.Errorf("the panic was not logged: %q", logs.String())
	}
}

// lockedBuffer is a log's buffer written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
