package gateway

import (
	"context"
	"crypto/sha256"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/contextd/contextd/internal/chat"
)

// A compacted history without a signal that keeps no call: Qwen Code
// compressing before a new prompt (its --resume turn), with no call in
// flight, sends its summary, the acknowledgement and the prompt. Nothing
// in it is the session's but the summary, which the provider wrote for it
// in answer to the client's summary request, an aside of that session
// (extensionAside). This replica remembers the latest such answers, per
// tenant (summaryMemo: at most summariesPerTenant of them, for at most
// summaryTenants tenants, each a prefix and a digest, not the text): a
// request without a signal that extends no session, keeps no call, and
// whose first user message holds the whole of one remembered answer
// (without its <analysis> block) of exactly one session is that session's
// client compaction, checked as unsignalledCompacts checks one that kept
// calls. Another replica does not remember the answer: the request is a
// new conversation there, as before (docs/gateway.md, Known limits).
// Work: for such a request, at most summariesPerTenant substring searches
// of a prefix in its first user message and as many digests.

const (
	summariesPerTenant = 16
	summaryTenants     = 256
	// summaryPrefix: the bytes of an answer a request's message is
	// searched for; answers shorter than minSummary are not remembered
	// (too little to tell conversations apart).
	summaryPrefix = 128
	minSummary    = 64
)

type summaryRecord struct {
	session string
	prefix  string
	size    int
	digest  [32]byte
}

// summaryMemo remembers the latest answers of unsignalled asides.
type summaryMemo struct {
	mu       sync.Mutex
	byTenant map[string][]summaryRecord
}

var analysisBlock = regexp.MustCompile(`(?s)<analysis>.*?</analysis>\s*`)

// summaryBody is the text of reply without <analysis> blocks, trimmed (the
// part a client keeps as its summary).
func summaryBody(reply []chat.Message) string {
	var b strings.Builder
	for i := range reply {
		for _, p := range reply[i].Parts {
			if p.Type == chat.PartText {
				b.WriteString(p.Text)
			}
		}
	}
	return strings.TrimSpace(analysisBlock.ReplaceAllString(b.String(), ""))
}

// remember keeps the answer reply of an aside of session id.
func (s *summaryMemo) remember(tenant, id string, reply []chat.Message) {
	body := summaryBody(reply)
	if len(body) < minSummary {
		return
	}
	rec := summaryRecord{session: id, prefix: body[:min(len(body), summaryPrefix)], size: len(body), digest: sha256.Sum256([]byte(body))}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byTenant == nil {
		s.byTenant = make(map[string][]summaryRecord)
	}
	recs, ok := s.byTenant[tenant]
	if !ok && len(s.byTenant) >= summaryTenants {
		for t := range s.byTenant { // any other tenant's: a bound, not a policy
			delete(s.byTenant, t)
			break
		}
	}
	if len(recs) >= summariesPerTenant {
		recs = recs[1:]
	}
	s.byTenant[tenant] = append(recs, rec)
}

// find is the one session whose remembered answer text holds whole (""
// when none, or more than one session's).
func (s *summaryMemo) find(tenant, text string) string {
	s.mu.Lock()
	recs := append([]summaryRecord(nil), s.byTenant[tenant]...)
	s.mu.Unlock()
	found := ""
	for _, r := range recs {
		at := strings.Index(text, r.prefix)
		if at < 0 || at+r.size > len(text) || sha256.Sum256([]byte(text[at:at+r.size])) != r.digest {
			continue
		}
		if found != "" && found != r.session {
			return ""
		}
		found = r.session
	}
	return found
}

// summarizedIn resolves a request without a signal that keeps no call as
// the client compaction of the session whose aside answered the summary
// its first user message holds (ok).
func (g *Gateway) summarizedIn(ctx context.Context, tenant string, c *conversation, sig signal, noRepeat bool, until time.Time) (resolved, bool, error) {
	var text strings.Builder
	for _, p := range c.msgs[0].Parts {
		if p.Type == chat.PartText {
			text.WriteString(p.Text)
		}
	}
	id := g.summaries.find(tenant, text.String())
	if id == "" || g.busy(ctx, tenant, id, "", until) {
		return resolved{}, false, nil
	}
	m, err := g.match(ctx, tenant, id, c, noRepeat)
	if err != nil || m == nil || !unsignalledCompacts(m, c, 1, false) {
		return resolved{}, false, hideSession(err, resolved{id: id, named: sig.owns(id)})
	}
	res, ok, err := g.compactIn(ctx, tenant, id, c, sig, m)
	return res, ok, hideSession(err, resolved{id: id, named: sig.owns(id)})
}
