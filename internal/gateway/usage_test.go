package gateway

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// fixture reads a file of testdata/.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureEvent is an event of a fixture: its name and data.
type fixtureEvent struct {
	name string
	data []byte
}

// fixtureEvents reads an SSE fixture's events, in order.
func fixtureEvents(t *testing.T, name string) []fixtureEvent {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(fixture(t, name)))
	sc.Buffer(nil, 1<<20)
	var out []fixtureEvent
	var ev string
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if ev != "" || data != nil {
				out = append(out, fixtureEvent{ev, data})
			}
			ev, data = "", nil
		case bytes.HasPrefix(line, []byte("event: ")):
			ev = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append([]byte(nil), line[len("data: "):]...)
		}
	}
	return out
}

// streamFixture feeds an SSE fixture to st event by event, as relay does,
// and returns what st saw once the stream's last event passed.
func streamFixture(t *testing.T, st streamer, name string) usage {
	t.Helper()
	for _, ev := range fixtureEvents(t, name) {
		if _, last := st.event(ev.name, ev.data); last {
			u, _, ok := st.result()
			if !ok {
				t.Fatalf("%s: the last event passed and there is no result", name)
			}
			return u
		}
	}
	t.Fatalf("%s: the stream ended without its last event", name)
	return usage{}
}

// checkBilled fails unless u is the provider's figures, field by field, in
// contextd's convention (usage.go): uncached input, cache reads, cache
// writes, output, adding up to the provider's count of the request.
func checkBilled(t *testing.T, name string, u usage, uncached, read, write, output, counted int64) {
	t.Helper()
	want := usage{ok: true, uncached: uncached, cacheRead: read, cacheWrite: write, output: output}
	if u != want {
		t.Errorf("%s: usage %+v, want %+v", name, u, want)
	}
	if u.input() != counted {
		t.Errorf("%s: %d input tokens in all, the provider counted %d", name, u.input(), counted)
	}
	r := u.report("v")
	if r.InputTokens != uncached || r.CacheReadTokens != read || r.CacheCreationTokens != write || r.OutputTokens != output {
		t.Errorf("%s: report %+v, want uncached %d, reads %d, writes %d, output %d", name, r, uncached, read, write, output)
	}
}
