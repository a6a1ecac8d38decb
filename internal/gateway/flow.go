package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
)

// conversation is a request's conversation in the domain's terms, as a
// door parsed it.
type conversation struct {
	model  string
	stream bool
	system string
	tools  []chat.Tool
	msgs   []chat.Message
	// digests are msgs' digests (digestOf), in order.
	digests [][32]byte
	// ids are msgs' identities (identityOf) and chains the history chains
	// they end (historyChains), in order.
	ids    [][32]byte
	chains []string
	// details are msgs' details (detailOf), computed when a log is first
	// matched.
	details [][16]byte
	// clientMarks: the client placed prompt-cache marks of its own; marked
	// are the digests of the messages it marked.
	clientMarks bool
	marked      map[[32]byte]json.RawMessage
	// wantsUsage: the client asked for the stream's usage chunk (OpenAI).
	wantsUsage bool
	// raws are the client's own JSON of msgs, by digest, for doors that
	// send a message the client sent back as it came; lead is how many
	// elements of the client's array the system prompt took (sent back as
	// they came).
	raws map[[32]byte]json.RawMessage
	lead int
	// runs are the client's own items of msgs, by digest (Responses: a
	// message is a run of items); blocks, its content blocks (Anthropic).
	runs   map[[32]byte][]json.RawMessage
	blocks map[[32]byte][]json.RawMessage
	// pins are the texts that pin a message appended with them (pin.go).
	pins []string
	// passthrough, when set, says why the request is forwarded unchanged
	// (the provider holds the conversation, not the client).
	passthrough string
}

// serveDoor is the whole request: admit, parse, read the client's signal,
// identify the session and prepare the view (prepare.go, identify.go),
// forward, relay, record.
func (g *Gateway) serveDoor(w http.ResponseWriter, r *http.Request, d door) {
	shape := d.shape()
	tenant, ok := g.admit(w, r, shape)
	if !ok {
		return
	}
	body, ok := g.readBody(w, r, shape)
	if !ok {
		return
	}
	fields := body.fields
	ctx := r.Context()
	c, err := d.parse(body)
	if err != nil {
		g.writeDomainError(ctx, w, shape, err)
		return
	}
	if c.passthrough != "" {
		w.Header().Add(HeaderWarning, c.passthrough)
		g.forward(w, r, d, c, body.raw, nil)
		return
	}
	sig, err := signalOf(tenant, d.name(), r, fields)
	if err != nil {
		writeError(w, shape, http.StatusBadRequest, errInvalid, err.Error())
		return
	}
	historyChains(d.name(), sig, c)
	if _, known := g.cfg.Models.Lookup(c.model); !known {
		w.Header().Add(HeaderWarning, fmt.Sprintf("model %q is not in contextd's registry: counted with the default window and encoding (approximate); add it with CONTEXTD_MODELS_FILE", c.model))
	}
	pins, err := pinMarkers(r.Header.Values(HeaderPin))
	if err != nil {
		g.writeDomainError(ctx, w, shape, err)
		return
	}
	c.pins = pins
	res, prep, key, err := g.prepare(ctx, tenant, d, c, sig)
	if err != nil {
		g.writeDomainError(ctx, w, shape, err)
		return
	}
	g.digests.extend(tenant, res.id, res.created, storedTail(prep.Messages, res.fresh))
	prep.Messages = asSent(prep.Messages, c)
	client := toolsOf(fields)
	expandOn := len(prep.Tools) > 0 && !manyChoices(fields)
	if len(prep.Tools) > 0 && !expandOn {
		w.Header().Add(HeaderWarning, "n > 1: the expand tool is not offered (one answer is expanded at a time)")
	}
	if expandOn {
		if err := withExtraTools(d, fields, prep.Tools); err != nil {
			g.writeDomainError(ctx, w, shape, err)
			return
		}
	}
	if err := d.build(body, c, prep.Messages, prep.Cache); err != nil {
		g.writeDomainError(ctx, w, shape, err)
		return
	}
	h := w.Header()
	if res.named {
		// Only a session the caller named, or its signal derives, or this
		// request made: never one a stranger's conversation made.
		h.Set(HeaderSession, res.id)
	}
	h.Set(HeaderHistory, res.history)
	if res.from != "" {
		h.Set(HeaderHistory, res.history+"; from="+res.from)
	}
	h.Set(HeaderUsed, strconv.FormatFloat(prep.Status.Usage.PercentUsed, 'f', 1, 64))
	h.Set(HeaderCompacted, strconv.FormatBool(prep.Status.Compacted))
	for _, warn := range prep.Status.Warnings {
		h.Add(HeaderWarning, headerSafe(warn))
	}
	// Until this answer is recorded, the session is busy (no stranger's
	// request lands in it), and a request carrying its reply waits for it
	// (awaitReply).
	pending := make(chan struct{})
	names := []string{tenant + "\x00" + res.id}
	for _, n := range names {
		g.inflight.Store(n, pending)
	}
	release := sync.OnceFunc(func() {
		for _, n := range names {
			g.inflight.CompareAndDelete(n, pending)
		}
		close(pending)
	})
	recording := false
	defer func() {
		if !recording {
			release() // also when relaying panicked
		}
	}()
	done := func(us []usage, reply []chat.Message) {
		// The answer is out: record it without holding the client.
		if !g.startRecord() {
			return
		}
		recordingKey := recordingKey(tenant, res.id)
		g.inflight.Store(recordingKey, pending)
		names = append(names, recordingKey)
		if res.repeat == 0 && len(reply) > 0 {
			if chain := replyStamp(c, reply); chain != "" {
				n := replyKey(tenant, chain)
				g.inflight.Store(n, pending)
				names = append(names, n)
			}
		}
		recording = true
		go func() {
			defer g.records.Done()
			defer release()
			defer func() {
				if p := recover(); p != nil {
					g.log.ErrorContext(ctx, "gateway recording panicked", "session", res.id, "panic", fmt.Sprint(p))
				}
			}()
			g.record(ctx, tenant, res, prep, key, us, reply)
		}()
	}
	if len(prep.Tools) > 0 {
		g.forwardExpanding(w, r, d, c, body, client, tenant, res.id, prep, expandOn, done)
		return
	}
	g.forward(w, r, d, c, body.encode(), func(u usage, reply []chat.Message) { done([]usage{u}, reply) })
}

// manyChoices reports whether the request asks for more than one choice
// (Chat Completions' n).
func manyChoices(fields map[string]json.RawMessage) bool {
	var n float64
	return json.Unmarshal(fields["n"], &n) == nil && n > 1
}

// joinJSON writes an array of JSON values (checked, or written by the
// gateway) without checking them again.
func joinJSON(items []json.RawMessage) json.RawMessage {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// requestKey is the digest of a request's whole history in its session:
// the idempotency key of its append, so a client's retry (or two replicas
// serving the same request) appends its new messages once.
func requestKey(id string, digests [][32]byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s:%d:", len(id), id, len(digests))
	for _, d := range digests {
		h.Write(d[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:20])
}

// headerSafe keeps a header value to printable ASCII.
func headerSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < ' ' || c > '~' {
			b[i] = '?'
		}
	}
	if len(b) > 512 {
		b = append(b[:509], "..."...)
	}
	return string(b)
}

// record writes what the provider answered: its usage (as ReportUsage,
// for the view the call sent) and the assistant's reply (appended, so the
// client's next request, which carries it, matches the log). It runs
// after the client hung up too; failures are logged, never answered (the
// answer is the provider's), and a reply that could not be appended is
// appended by the next request that carries it.
func (g *Gateway) record(ctx context.Context, tenant string, res resolved, prep engine.PrepareResult, key string, us []usage, reply []chat.Message) {
	id := res.id
	ctx, cancel := detach(ctx)
	defer cancel()
	// The reply is appended only to the session as this call left it
	// (and as the report moves it): when another request came first, that
	// request carried the reply itself, if the client kept it.
	expect := prep.Status.Version
	if res.repeat > 0 {
		reply = nil // a repeated request's reply is not the session's
	}
	// One report per upstream call. The calls of an expand loop after the
	// first (us[1:]) sent the view and more, and are reported first, so
	// the session's anchor is the first call's, which sent the view alone.
	for i := range us {
		u := us[(i+1)%len(us)]
		report := u.report(prep.ViewToken)
		if res.repeat > 0 {
			// A repeated request sent a prefix of the view: the call goes
			// into the ledger, nothing else.
			n := int64(len(prep.Messages))
			report.ViewToken, report.MessageCount = "", &n
		}
		if !u.ok {
			continue
		}
		if _, err := g.cfg.Engine.ReportUsage(ctx, tenant, id, report); err != nil {
			g.log.WarnContext(ctx, "gateway usage not recorded", "session", id, "error", err.Error())
		} else {
			expect++
		}
	}
	if len(reply) == 0 {
		return
	}
	for i := range reply {
		setMeta(&reply[i], metaReply, "true")
	}
	out, err := g.appendReply(ctx, tenant, res, prep, key, expect, reply)
	if err != nil {
		g.log.WarnContext(ctx, "gateway reply not recorded", "session", id, "error", err.Error())
		return
	}
	if len(out.Messages) != len(reply) {
		return
	}
	// The digests are the reply's own (the answer carries positions).
	for i := range reply {
		reply[i].Position = out.Messages[i].Position
	}
	g.digests.extend(tenant, id, res.created, reply)
}

// appendReply appends the reply to the session as the call left it. The
// session's version may have moved without its log growing: the report of
// the previous call, relayed by another replica, committed after this
// call's prepare. Then the reply still follows the last message the call
// sent and is appended at the new version. When the log grew (another
// request appended, usually carrying this reply itself) or the session was
// made again, the reply is not appended: the next request that carries it
// appends it.
func (g *Gateway) appendReply(ctx context.Context, tenant string, res resolved, prep engine.PrepareResult, key string, expect int64, reply []chat.Message) (engine.AppendResult, error) {
	var retry conflicts // conflictBudget bounds the appends that meet a log that has not grown
	for {
		out, err := g.cfg.Engine.AppendMessages(ctx, tenant, res.id, engine.AppendInput{Messages: reply, IdempotencyKey: "gwr-" + key, ExpectedVersion: &expect})
		if !errors.Is(err, store.ErrVersionConflict) || !retry.again(ctx) {
			return out, err
		}
		st, serr := g.cfg.Engine.SessionStatus(ctx, tenant, res.id)
		if serr != nil {
			return out, err
		}
		if st.LogCount != prep.Status.LogCount || !st.Created.Equal(prep.Status.Created) {
			return out, err
		}
		expect = st.Version
	}
}

// storedTail is the stored copies of fresh at the end of view (they carry
// their log positions), or nil when the view does not end with them.
func storedTail(view, fresh []chat.Message) []chat.Message {
	if len(fresh) == 0 || len(view) < len(fresh) {
		return nil
	}
	tail := view[len(view)-len(fresh):]
	for i := range tail {
		if storedDigest(&tail[i]) != storedDigest(&fresh[i]) {
			return nil
		}
	}
	return tail
}

// maxAnswerBytes bounds a non-streamed answer the gateway reads to record.
const maxAnswerBytes = 64 << 20

// maxEventBytes bounds one SSE event.
const maxEventBytes = 16 << 20

// forward sends body upstream with the client's headers and relays the
// answer: its status, headers and body unchanged (SSE event by event, as
// it arrives), plus contextd's headers. done, when set, records a
// successful answer before its last byte goes out.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, d door, c *conversation, body []byte, done func(usage, []chat.Message)) {
	ctx := r.Context()
	resp, err := g.send(ctx, r, d, body)
	if err != nil {
		if ctx.Err() != nil {
			return // the client went away
		}
		writeError(w, d.shape(), http.StatusBadGateway, errUpstream, "the provider could not be reached: "+upstreamReason(err))
		return
	}
	defer resp.Body.Close()
	copyResponseHeaders(w.Header(), resp.Header)
	if resp.StatusCode != http.StatusOK || done == nil {
		w.WriteHeader(resp.StatusCode)
		g.copyBody(ctx, w, resp.Body)
		return
	}
	if isEventStream(resp.Header.Get("Content-Type")) {
		g.relay(ctx, w, resp, d.stream(c), done)
		return
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil || len(answer) > maxAnswerBytes {
		if ctx.Err() != nil {
			return
		}
		w.Header().Del("Content-Type")
		writeError(w, d.shape(), http.StatusBadGateway, errUpstream, "the provider's answer could not be read: "+upstreamReason(err))
		return
	}
	if rw, ok := d.(answerRewriter); ok {
		answer = rw.clientAnswer(answer)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.WriteHeader(resp.StatusCode)
	// Recorded from before the client has it, so the client's next request
	// (which may come as soon as it has it) finds it recording and waits
	// for it (awaitReply); an answer the client did not get is its retry's
	// repeat.
	u, reply := d.answer(answer)
	done(u, reply)
	_, _ = w.Write(answer)
}

// copyBody relays a body as it comes, flushing each read.
func (g *Gateway) copyBody(ctx context.Context, w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if !flushed(rc) {
				return // the client is gone or stopped reading (write deadline)
			}
		}
		if err != nil || ctx.Err() != nil {
			return
		}
	}
}

// relay passes an SSE answer on event by event as it arrives, following
// it with st; the answer is recorded (done) just before its last event.
// A stream that ends without its last event (the provider or the network
// dropped it) is passed on as it came and records nothing, as no reply
// reached the client.
func (g *Gateway) relay(ctx context.Context, w http.ResponseWriter, resp *http.Response, st streamer, done func(usage, []chat.Message)) {
	rc := http.NewResponseController(w)
	w.WriteHeader(resp.StatusCode)
	_ = rc.Flush()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var ev, long, data []byte // the event's bytes, a line longer than br's buffer, its data
	var name string
	hasData := false
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			if len(long)+len(ev) > maxEventBytes {
				return // a malformed stream: cut, as the network would
			}
			continue
		}
		line := chunk
		if len(long) > 0 {
			long = append(long, chunk...)
			line, long = long, long[:0]
		}
		if len(line) == 0 {
			// The end of the body (or the connection dropped): pass on
			// what is left, as it came.
			if len(ev) > 0 {
				_, _ = w.Write(ev)
				_ = rc.Flush()
			}
			return
		}
		ev = append(ev, line...)
		if len(ev) > maxEventBytes {
			return // an event that never ends: cut, as the network would
		}
		text := bytes.TrimRight(line, "\r\n")
		if err == nil && len(text) == 0 {
			// The end of an event.
			forward, last := true, false
			if hasData || name != "" {
				forward, last = st.event(name, data)
			}
			if last {
				// Recorded from before the client has the last event
				// (see forward).
				if u, reply, ok := st.result(); ok {
					done(u, reply)
				}
			}
			if forward {
				if _, werr := w.Write(ev); werr != nil {
					return
				}
				if !flushed(rc) {
					return // the client is gone or stopped reading (write deadline)
				}
			}
			ev, data, name, hasData = ev[:0], data[:0], "", false
			if ctx.Err() != nil {
				return
			}
			continue
		}
		switch {
		case bytes.HasPrefix(text, []byte("event:")):
			name = string(bytes.TrimSpace(text[len("event:"):]))
		case bytes.HasPrefix(text, []byte("data:")):
			v := text[len("data:"):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, v...)
			hasData = true
		}
		if err != nil {
			_, _ = w.Write(ev)
			_ = rc.Flush()
			return
		}
	}
}

func isEventStream(ct string) bool {
	return len(ct) >= len("text/event-stream") && ct[:len("text/event-stream")] == "text/event-stream"
}

// upstreamReason says why the provider could not be reached, without
// echoing anything the client sent.
func upstreamReason(err error) string {
	if err == nil {
		return "answer over 64 MiB"
	}
	var ue interface{ Timeout() bool }
	if errors.As(err, &ue) && ue.Timeout() {
		return "timed out"
	}
	return "connection failed"
}

// Hop-by-hop headers (RFC 9110 7.6.1) and what the gateway sets itself.
var dropRequest = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Host": true, "Content-Length": true,
	// Cookies are contextd's origin's (a dashboard's), not the provider's.
	"Cookie": true,
	// The transport asks for gzip itself and decompresses, so the answer
	// can be read for its usage.
	"Accept-Encoding": true,
}

var dropResponse = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Content-Encoding": true,
}

// connectionNamed is the headers a message's Connection header names:
// hop-by-hop for this one connection (RFC 9110 7.6.1), dropped as
// net/http/httputil.ReverseProxy drops them, in both directions.
func connectionNamed(h http.Header) map[string]bool {
	var named map[string]bool
	for _, v := range h.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[http.CanonicalHeaderKey(f)] = true
			}
		}
	}
	return named
}

// copyRequestHeaders forwards the client's headers (its provider
// credentials among them) except hop-by-hop ones and contextd's own.
func copyRequestHeaders(dst, src http.Header) {
	named := connectionNamed(src)
	for k, vs := range src {
		if dropRequest[k] || named[k] || len(k) > len("X-Contextd-") && http.CanonicalHeaderKey(k[:len("X-Contextd-")]) == "X-Contextd-" {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

func copyResponseHeaders(dst, src http.Header) {
	named := connectionNamed(src)
	for k, vs := range src {
		// The provider's CORS grants and cookies are for its own origin,
		// not for contextd's.
		if dropResponse[k] || named[k] || strings.HasPrefix(k, "Access-Control-") || k == "Set-Cookie" {
			continue
		}
		dst[k] = append(dst[k], vs...)
	}
}

// credentials adds the server's provider key when the client sent none
// and the operator allowed it (CONTEXTD_GATEWAY_SERVER_KEYS): the keys are
// configured for the summarizers, and lending them to every caller is a
// decision of its own.
func (g *Gateway) credentials(h http.Header, shape wireShape) {
	if !g.cfg.LendKeys || h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		return
	}
	switch shape {
	case shapeAnthropic:
		if g.cfg.AnthropicAPIKey != "" {
			h.Set("X-Api-Key", g.cfg.AnthropicAPIKey)
		}
	default:
		if g.cfg.OpenAIAPIKey != "" {
			h.Set("Authorization", "Bearer "+g.cfg.OpenAIAPIKey)
		}
	}
}
