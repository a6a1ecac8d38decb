package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The three doors of the gateway and the model each asks for.
var doors = []struct{ path, model string }{
	{"/v1/chat/completions", "soak-gpt"},
	{"/v1/responses", "soak-gpt"},
	{"/v1/messages", "soak-claude"},
}

// turn is one message of a gateway conversation as the client holds it.
type turn struct{ role, text string }

// conversation is what one gateway agent's conversation acknowledged: the
// history of its last answered call, with that call's reply, and the
// session the gateway said it landed in.
type conversation struct {
	door    string
	session string
	acked   []turn
	// ackedAt is when the last of acked was acknowledged.
	ackedAt time.Time
	// pending is the user turn of a call that never got an answer (the
	// agent gave up and left the conversation): it may be in the log
	// once, at the end, or not at all.
	pending string
}

type gatewayAgents struct {
	s    *soak
	mu   sync.Mutex
	conv []*conversation
}

func (g *gatewayAgents) add(c *conversation) {
	g.mu.Lock()
	g.conv = append(g.conv, c)
	g.mu.Unlock()
}

func (g *gatewayAgents) snapshot() []conversation {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]conversation, len(g.conv))
	for i, c := range g.conv {
		out[i] = *c
		out[i].acked = append([]turn(nil), c.acked...)
	}
	return out
}

// run is one gateway agent: conversations of up to maxTurns turns, one
// after another, until ctx ends. Each call resends the whole history, as
// agents do; failed calls are retried as the SDKs retry them.
func (g *gatewayAgents) run(ctx context.Context, agent int) {
	s := g.s
	snippets := s.corpus[agent%len(s.corpus)]
	next := agent * 7
	for conv := 0; ctx.Err() == nil && conv < 1000; conv++ {
		door := doors[(agent+conv)%len(doors)]
		stream := (agent+conv)%2 == 1
		c := &conversation{door: door.path}
		g.add(c)
		turns := 6 + rand.IntN(14)
		for t := 0; t < turns && ctx.Err() == nil; t++ {
			text := fmt.Sprintf("«g%d.c%d.t%d» %s", agent, conv, t, snippets[next%len(snippets)])
			next++
			hist := append(append([]turn(nil), c.acked...), turn{"user", text})
			began := time.Now()
			reply, session, err := s.gatewayCall(ctx, door.path, door.model, hist, stream, agent)
			if err != nil {
				if ctx.Err() == nil {
					s.rep.note("gateway agent %d gave up a turn on %s: %v", agent, door.path, err)
				}
				g.mu.Lock()
				c.pending = text
				g.mu.Unlock()
				break
			}
			s.rep.ack("gateway "+door.path, time.Since(began))
			g.mu.Lock()
			c.acked = append(hist, turn{"assistant", reply})
			c.ackedAt = time.Now()
			if session != "" {
				// The gateway names a session only to the request that
				// made it (or named it, or whose signal derives it): a
				// later turn, found by its history, is not told again.
				c.session = session
			}
			g.mu.Unlock()
			s.think(ctx)
		}
	}
}

// retryable reports whether an SDK retries a response with this status
// (OpenAI's and Anthropic's: 408, 409, 429 and 5xx).
func retryable(status int) bool {
	return status == 408 || status == 409 || status == 429 || status >= 500
}

var errGaveUp = errors.New("gave up after the retries")

// gatewayCall sends one request with the SDKs' retries: up to 8 attempts,
// backoff from 0.5 s doubling to 8 s with jitter, retry-after honoured,
// every attempt at most 30 s, each to the next replica.
func (s *soak) gatewayCall(ctx context.Context, path, model string, hist []turn, stream bool, agent int) (string, string, error) {
	body := requestBody(path, model, hist, stream)
	var last error
	// named is the session an attempt was told: the one that made it is,
	// whether or not it got its answer (a retry that finds it by its
	// history is not told).
	named := ""
	for attempt := 0; attempt < 8; attempt++ {
		if attempt > 0 && !sleepCtx(ctx, backoff(attempt, last)) {
			return "", named, ctx.Err()
		}
		r := s.replicas[(agent+attempt)%len(s.replicas)]
		reply, session, err := s.gatewayAttempt(ctx, r.base()+path, path, body, stream)
		if session != "" {
			named = session
		}
		if err == nil {
			return reply, named, nil
		}
		var he *httpError
		if errors.As(err, &he) && !retryable(he.status) {
			s.rep.problem(invalid, "gateway %s answered %d to a valid request: %s", path, he.status, he.body)
			return "", "", err
		}
		s.rep.failed("gateway "+path, reasonOf(err))
		last = err
	}
	return "", "", fmt.Errorf("%w: %v", errGaveUp, last)
}

type httpError struct {
	status     int
	body       string
	retryAfter time.Duration
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

func reasonOf(err error) string {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return strconv.Itoa(he.status)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, errCut):
		return "stream cut"
	default:
		return "connection error"
	}
}

// backoff is the SDKs' wait before a retry: retry-after when the server
// said, else exponential with jitter.
func backoff(attempt int, last error) time.Duration {
	var he *httpError
	if errors.As(last, &he) && he.retryAfter > 0 && he.retryAfter <= 60*time.Second {
		return he.retryAfter
	}
	d := 500 * time.Millisecond << min(attempt-1, 4)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

var errCut = errors.New("the stream ended before its last event")

func (s *soak) gatewayAttempt(ctx context.Context, url, path string, body []byte, stream bool) (string, string, error) {
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/v1/messages") {
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("x-api-key", "sk-ant-soak")
	} else {
		req.Header.Set("Authorization", "Bearer sk-soak")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	session := resp.Header.Get("X-Contextd-Session")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return "", session, &httpError{status: resp.StatusCode, body: string(b), retryAfter: time.Duration(ra) * time.Second}
	}
	var reply string
	if stream {
		reply, err = readStream(path, resp.Body)
	} else {
		reply, err = readJSON(path, resp.Body)
	}
	return reply, session, err
}

// requestBody is the door's request for a history.
func requestBody(path, model string, hist []turn, stream bool) []byte {
	var msgs []any
	for _, t := range hist {
		switch {
		case path == "/v1/responses" && t.role == "assistant":
			msgs = append(msgs, map[string]any{"type": "message", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": t.text}}})
		default:
			msgs = append(msgs, map[string]any{"role": t.role, "content": t.text})
		}
	}
	var body map[string]any
	switch path {
	case "/v1/chat/completions":
		body = map[string]any{"model": model, "messages": append([]any{map[string]any{"role": "system", "content": "You are a soak-test agent."}}, msgs...)}
		if stream {
			body["stream_options"] = map[string]any{"include_usage": true}
		}
	case "/v1/responses":
		body = map[string]any{"model": model, "instructions": "You are a soak-test agent.", "input": msgs}
	default:
		body = map[string]any{"model": model, "max_tokens": 256, "system": "You are a soak-test agent.", "messages": msgs}
	}
	if stream {
		body["stream"] = true
	}
	b, _ := json.Marshal(body)
	return b
}

func readJSON(path string, r io.Reader) (string, error) {
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.NewDecoder(r).Decode(&out); err != nil {
		return "", fmt.Errorf("%w: %v", errCut, err)
	}
	text := ""
	switch path {
	case "/v1/chat/completions":
		if len(out.Choices) > 0 {
			text = out.Choices[0].Message.Content
		}
	case "/v1/responses":
		for _, o := range out.Output {
			if o.Type == "message" {
				for _, c := range o.Content {
					text += c.Text
				}
			}
		}
	default:
		for _, c := range out.Content {
			if c.Type == "text" {
				text += c.Text
			}
		}
	}
	return text, nil
}

// readStream reads an SSE answer to its last event and returns its text;
// an answer cut before it, or an error event, is errCut.
func readStream(path string, r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var text strings.Builder
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" && path == "/v1/chat/completions" {
			return text.String(), nil
		}
		var ev struct {
			Type    string `json:"type"`
			Delta   any    `json:"delta"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return "", fmt.Errorf("%w: %v", errCut, err)
		}
		if ev.Error != nil || ev.Type == "error" || event == "error" || ev.Type == "response.failed" {
			return "", fmt.Errorf("%w: error event %s", errCut, data)
		}
		switch path {
		case "/v1/chat/completions":
			for _, c := range ev.Choices {
				text.WriteString(c.Delta.Content)
			}
		case "/v1/responses":
			if ev.Type == "response.output_text.delta" {
				d, _ := ev.Delta.(string)
				text.WriteString(d)
			}
			if ev.Type == "response.completed" {
				return text.String(), nil
			}
		default:
			if d, ok := ev.Delta.(map[string]any); ok && ev.Type == "content_block_delta" {
				t, _ := d["text"].(string)
				text.WriteString(t)
			}
			if ev.Type == "message_stop" {
				return text.String(), nil
			}
		}
	}
	return "", errCut
}
