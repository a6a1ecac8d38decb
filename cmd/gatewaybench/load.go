package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// load is a cell's conversations against one URL, their untimed first
// calls made.
type load interface {
	// timed makes the timed calls, all conversations at once, and returns
	// their latencies, the last request's size, the CPU time the load
	// spent in a process of its own (0 when it runs in this one: this
	// process's CPU is counted by the caller) and the wall time the calls
	// took, measured by the load: a cell's rate is its calls over that, not
	// over what a load process's report and exit add (about 3 ms a cell).
	timed() (latencies []time.Duration, body int, own, wall time.Duration)
}

// local is a load run by this process's goroutines with client.
type local struct {
	client *http.Client
	c      cell
	url    string
	calls  int
	convs  [][]byte // each conversation's messages, as JSON array elements
	tools  []byte
	last   int
}

// newLocal builds c.convs conversations of c.messages messages, tagged
// with tag, and makes their untimed first call against url, concurrently.
func newLocal(client *http.Client, calls int, c cell, url, tag string) *local {
	l := &local{client: client, c: c, url: url, calls: calls, convs: make([][]byte, c.convs), tools: []byte{}}
	// Each conversation's messages are JSON array elements, extended as it
	// grows: building a request copies them (no marshalling of the whole
	// history per call, which would slow the client, not the paths).
	filler := strings.Repeat("lorem ipsum dolor sit amet ", c.contentBytes/27+1)[:c.contentBytes]
	for i := range l.convs {
		l.add(i, "system", "You are a coding agent.")
		for j := range c.messages - 1 {
			l.add(i, []string{"user", "assistant"}[j%2], fmt.Sprintf("%s conversation %d message %d: %s", tag, i, j, filler))
		}
		if c.messages%2 == 0 { // the last was a user's
			l.add(i, "assistant", "ok")
		}
	}
	if c.tools > 0 {
		l.tools = slices.Concat([]byte(`,"tools":`), toolsJSON(c.tools))
	}
	l.each(func(i int) { l.call(i, -1) })
	return l
}

func (l *local) add(i int, role, content string) {
	m, _ := json.Marshal(map[string]string{"role": role, "content": content})
	if len(l.convs[i]) > 0 {
		l.convs[i] = append(l.convs[i], ',')
	}
	l.convs[i] = append(l.convs[i], m...)
}

// call sends conversation i's next step and adds the answer.
func (l *local) call(i, step int) time.Duration {
	l.add(i, "user", fmt.Sprintf("step %d", step))
	body := slices.Concat([]byte(`{"model":"gpt-4.1","messages":[`), l.convs[i], []byte(`]`), l.tools, []byte(`}`))
	if i == 0 {
		l.last = len(body)
	}
	req, _ := http.NewRequest(http.MethodPost, l.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-bench")
	t0 := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		fatalf("%s: %v", l.url, err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if resp.StatusCode != http.StatusOK {
		fatalf("%s: status %d: %.300s", l.url, resp.StatusCode, out)
	}
	l.add(i, "assistant", "ok")
	return d
}

// each runs fn for every conversation at once.
func (l *local) each(fn func(i int)) {
	var wg sync.WaitGroup
	for i := range l.convs {
		wg.Add(1)
		go func() { defer wg.Done(); fn(i) }()
	}
	wg.Wait()
}

func (l *local) timed() ([]time.Duration, int, time.Duration, time.Duration) {
	latencies := make([][]time.Duration, len(l.convs))
	start := time.Now()
	l.each(func(i int) {
		for step := range l.calls {
			latencies[i] = append(latencies[i], l.call(i, step))
		}
	})
	wall := time.Since(start)
	return slices.Concat(latencies...), l.last, 0, wall
}
