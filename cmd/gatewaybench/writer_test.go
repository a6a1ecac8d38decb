package main

import (
	"net/http"
	"testing"
	"time"
)

// TestWriterMeterReadsContextd: the writer's line reads an in-process
// contextd's /metrics: after a few gateway requests (two writes each, one
// of them durable) its turn, its syncs and its calls have grown. Fails
// when the metrics' names here and in internal/app drift apart (every
// reading zero).
func TestWriterMeterReadsContextd(t *testing.T) {
	up := startUpstream()
	base, writer, stop := startContextd(map[string]string{}, up)
	defer stop()
	before := writer.read()
	l := newLocal(&http.Client{}, 3, cell{convs: 1, messages: 4, contentBytes: 10}, base+"/v1/chat/completions", "meter")
	l.timed()
	after := writer.read()
	if after.turn <= before.turn || after.sync <= before.sync || after.calls-before.calls < 3 || after.groups <= before.groups {
		t.Fatalf("after three gateway requests: %+v, before %+v; want the turn, the syncs, the groups and at least three calls grown", after, before)
	}
	if line := after.since(before, time.Second, 3); line == "" {
		t.Fatal("no line")
	}
}
