package compaction

import (
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// Tier is one kind of compaction, cheapest first.
type Tier string

// Tiers.
const (
	TierPrune      Tier = "prune"       // reversible placeholders, no LLM
	TierSummarize  Tier = "summarize"   // the head becomes one summary message
	TierDropMiddle Tier = "drop_middle" // whole turns after the summary, only to fit
)

// AllTiers lists the tiers cheapest first.
var AllTiers = []Tier{TierPrune, TierSummarize, TierDropMiddle}

// SummaryInput is what a summarizer is asked to condense.
type SummaryInput struct {
	Round        int
	OriginalTask string
	Previous     string // the summary of round Round-1, if it is being integrated
	// PreviousFolded is what the previous summary's trail folded, its
	// lines whole (its MetaTrailFolded): the trail shows them again where
	// it has room (trailfolded.go).
	PreviousFolded string
	Messages       []chat.Message
	Instructions   string
	MaxTokens      int
	// AskTokens is the max_tokens an LLM summarizer asks its model for
	// when it is more than MaxTokens: summary_max_tokens, which the cap
	// giving way to the trail (trailAndCap, yieldToTrail) does not lower,
	// since a reasoning model counts its reasoning in it; the answer is
	// held to MaxTokens, its last lines left out (internal/summarize).
	AskTokens int
	// TrailMaxTokens is the budget of the summary's exact artifact trail,
	// on top of MaxTokens (TrailBudget; 0: TrailTokens says; negative: no
	// room for a trail, the summary has none).
	TrailMaxTokens int
	// ID is the summary's own id, which its first line names
	// (SummaryHeader), in the wording of Expand (Policy.Expander).
	ID     string
	Expand Expander
	// Count returns the tokens of a text in the session's encoding.
	Count func(string) int
	// Trail is the summary's trail when the planner made it already, for
	// this input (Request.Trail, measuring the cut); nil: the summarizer
	// makes it.
	Trail *string
	// Kept is what the view keeps verbatim after the summary (the tail
	// and the messages kept before the cut): the trail leaves out a line
	// whose command, file, test, error or URL these show again.
	Kept []chat.Message
}

// Request is everything the planner needs; it does no I/O of its own (the
// Count and Summarize callbacks are the caller's).
type Request struct {
	// View is the active view, in order; every message has ID and Tokens.
	View []chat.Message
	// OriginalTaskID is the id of the session's first user message.
	OriginalTaskID string
	// Fixed is what every request carries besides the view: system prompt,
	// tool definitions and reply priming.
	Fixed  int64
	Window int64
	Policy Policy
	// Target is the fraction of the usable window to aim for.
	Target float64
	// Tiers allowed, in any order; they run cheapest first.
	Tiers []Tier
	// Round is the number this compaction will have (1 for the first).
	Round        int
	Instructions string
	Count        func(*chat.Message) int64
	CountText    func(string) int
	Summarize    func(SummaryInput) (string, error)
	// Trail returns the trail of a summary of in and the tokens it takes
	// (internal/summarize), so the cut leaves room for what it needs
	// rather than its whole budget; the summary of the cut chosen is
	// written with the trail measured for it (SummaryInput.Trail), not
	// made again. nil: the whole budget, and the summarizer makes it.
	Trail func(SummaryInput) MeasuredTrail
	// NewID returns a fresh message id for a synthetic message of a kind.
	NewID func(kind chat.Kind) string
}

// Replacement records one change: what was replaced, by what, and why.
type Replacement struct {
	Tier         Tier     `json:"tier"`
	NewID        string   `json:"new_id,omitempty"`
	Replaced     []string `json:"replaced"`
	Reason       string   `json:"reason"`
	TokensBefore int64    `json:"tokens_before"`
	TokensAfter  int64    `json:"tokens_after"`
}

// Plan is the outcome: the new active view and how it came to be.
type Plan struct {
	View         []chat.Message
	New          []chat.Message // synthetic messages of View, to store
	Items        []Replacement
	Tiers        []Tier
	TokensBefore int64 // used tokens (Fixed + view) before
	TokensAfter  int64
	Summary      string
	// SummaryFailed carries the summarizer's error when it failed and the
	// tier was skipped.
	SummaryFailed error
}

// Changed reports whether the plan changes the view.
func (p *Plan) Changed() bool { return len(p.Items) > 0 }

// ErrTooLarge means the request cannot fit even after every allowed tier;
// the message says what alone is too large.
var ErrTooLarge = errors.New("request cannot fit the context window")

// Usable is the window minus the reserved output.
func (r *Request) Usable() int64 { return r.Window - r.Policy.ReservedOutputTokens }

func (r *Request) allowed(t Tier) bool {
	for _, a := range r.Tiers {
		if a == t {
			return true
		}
	}
	return false
}

func sumTokens(msgs []chat.Message) int64 {
	var n int64
	for i := range msgs {
		n += msgs[i].Tokens
	}
	return n
}

// planner carries the working state of one Plan call. viewTokens is the
// running total of view's tokens: every change to view goes through replace
// or setView, which keep it exact, so used() is O(1) and planning stays
// linear in the length of the view.
type planner struct {
	req        *Request
	view       []chat.Message
	viewTokens int64
	plan       *Plan
	target     int64
	// pruned maps a placeholder this plan made to the message it stands
	// in for: a summary of the same plan reads the original, not the
	// placeholder.
	pruned map[string]chat.Message
	// kept is what instructions() keeps, computed once on the view as the
	// plan found it (a tier only ever replaces other messages, but for
	// pruneScaffolding, last in a pass, which swaps a kept message for its
	// stand-in).
	kept map[string]bool
}

func (p *planner) used() int64 { return p.req.Fixed + p.viewTokens }

// setView replaces the whole view (one pass to total it).
func (p *planner) setView(view []chat.Message) {
	p.view = view
	p.viewTokens = sumTokens(view)
}

// PlanCompaction applies the allowed tiers, cheapest first, until usage is at
// or under the target or the tiers are used up. Drop-middle runs only when the
// request would not fit otherwise. The result passes Validate, or the call
// returns an error (ErrTooLarge when the request cannot fit at all).
//
// What the person said (instructions) is kept only while the request fits:
// when it cannot fit with them kept verbatim (standing instructions are kept
// whatever their size, and keep_human_tokens may exceed the window), the
// planner plans once more keeping only the original task, pinned and the
// latest user message, as before they were kept. That second pass, at most
// one, repeats the tiers' work (a second summarizer call). In each pass,
// when the tiers leave the request past the window, the scaffolding parts
// of the original task and the latest user message give way last
// (pruneScaffolding; what was typed stays verbatim): so they go before
// what the person said does, at no summarizer call of their own.
func PlanCompaction(req Request) (*Plan, error) {
	first := &planner{req: &req, view: req.View}
	kept := first.instructions()
	plan, err := planCompaction(req, kept)
	if errors.Is(err, ErrTooLarge) {
		for id := range kept {
			if !first.baseKept(id) {
				return planCompaction(req, map[string]bool{})
			}
		}
	}
	return plan, err
}

// planCompaction plans keeping kept verbatim as what the person said; when
// nothing else fits, the scaffolding parts of the original task and the
// latest user message are pruned (pruneScaffolding) last, in the same pass.
func planCompaction(req Request, kept map[string]bool) (*Plan, error) {
	p := &planner{req: &req, plan: &Plan{}, kept: kept}
	p.setView(append([]chat.Message(nil), req.View...))
	p.plan.TokensBefore = p.used()
	p.target = int64(req.Target * float64(req.Usable()))
	if req.allowed(TierPrune) && p.used() > req.Usable() {
		p.cutOversizedResults(req.Usable()) // a tool result larger than the window alone (oversized.go)
	}
	if req.allowed(TierPrune) && p.used() > p.target {
		p.prune()
	}
	if req.allowed(TierSummarize) && p.used() > p.target {
		if err := p.summarize(); err != nil {
			return nil, err
		}
	}
	if req.allowed(TierDropMiddle) && p.used() > req.Usable() {
		p.dropMiddle()
	}
	if req.allowed(TierPrune) && p.used() > req.Usable() {
		p.pruneScaffolding() // only what the tiers left past the window: no pass or summarizer call of its own
	}
	if req.allowed(TierPrune) && p.used() > req.Usable() {
		p.cutOversizedResults(0) // protected tool results, largest first, while past the window (oversized.go)
	}
	if p.used() > req.Usable() {
		return nil, p.tooLarge()
	}
	p.plan.View = p.view
	p.plan.TokensAfter = p.used()
	if err := Validate(req.View, p.view, req.OriginalTaskID); err != nil {
		return nil, fmt.Errorf("compaction plan failed validation (a bug; nothing was changed): %w", err)
	}
	return p.plan, nil
}

func (p *planner) addTier(t Tier) {
	for _, x := range p.plan.Tiers {
		if x == t {
			return
		}
	}
	p.plan.Tiers = append(p.plan.Tiers, t)
}

// protected returns the ids that no tier may touch: pinned messages, the
// original task, the latest user message, or its stand-in whose
// scaffolding was pruned (and, for summarize and drop, the
// pair partners of those).
func (p *planner) protected() map[string]bool {
	keep := map[string]bool{}
	for i := range p.view {
		m := &p.view[i]
		if m.Pinned || m.ID == p.req.OriginalTaskID {
			keep[m.ID] = true
		}
	}
	if latestUser := latestUserID(p.view); latestUser != "" {
		keep[latestUser] = true
	}
	for id := range p.instructions() {
		keep[id] = true
	}
	return keep
}

// latestUserID returns the id of the view's latest user message that is
// not a summary or a placeholder, or of the stand-in (pruneScaffolding)
// that is that message; "" when there is none. One pass over the view.
func latestUserID(view []chat.Message) string {
	latest := ""
	for i := range view {
		m := &view[i]
		if m.Role == chat.RoleUser && m.Kind != chat.KindSummary && (m.Kind != chat.KindPlaceholder || IsStandIn(m)) {
			latest = m.ID
		}
	}
	return latest
}

// callNames maps tool call ids to tool names, for placeholder text.
func callNames(view []chat.Message) map[string]string {
	names := map[string]string{}
	for _, m := range view {
		for _, part := range m.Parts {
			if part.Type == chat.PartToolCall {
				names[part.ToolCall.ID] = part.ToolCall.Name
			}
		}
	}
	return names
}

// replace swaps view[i] for a synthetic message and records it. A repl
// with Tokens already counted them (masked; the count reads neither its id
// nor its pin); one without is counted here.
func (p *planner) replace(i int, repl chat.Message, tier Tier, reason string) {
	orig := p.view[i]
	repl.ID = p.req.NewID(repl.Kind)
	repl.Pinned = false
	if repl.Tokens == 0 {
		repl.Tokens = p.req.Count(&repl)
	}
	p.view[i] = repl
	p.viewTokens += repl.Tokens - orig.Tokens
	if p.pruned == nil {
		p.pruned = map[string]chat.Message{}
	}
	p.pruned[repl.ID] = orig
	p.plan.New = append(p.plan.New, repl)
	p.plan.Items = append(p.plan.Items, Replacement{Tier: tier, NewID: repl.ID, Replaced: []string{orig.ID},
		Reason: reason, TokensBefore: orig.Tokens, TokensAfter: repl.Tokens})
	p.addTier(tier)
}

// recentResults is the positions of view's newest n tool results (the
// ones ProtectRecentToolResults keeps from pruning).
func recentResults(view []chat.Message, n int) map[int]bool {
	recent := map[int]bool{}
	for i := len(view) - 1; i >= 0 && n > 0; i-- {
		if toolResultOf(&view[i]) != nil {
			recent[i] = true
			n--
		}
	}
	return recent
}

func toolResultOf(m *chat.Message) *chat.ToolResult {
	if m.Role != chat.RoleTool {
		return nil
	}
	for _, part := range m.Parts {
		if part.Type == chat.PartToolResult {
			return part.ToolResult
		}
	}
	return nil
}

// minPruneTokens is the smallest content worth a placeholder.
const minPruneTokens = 100

// prune runs the reversible tier: older duplicate content, old tool results
// beyond the protected newest ones, then long old messages, each oldest
// first, until usage is at or under the target.
func (p *planner) prune() {
	keep := p.protected()
	names := callNames(p.view)
	n := len(p.view)
	via := p.req.Policy.Expander()

	// Newest tool results are protected.
	protectedResults := recentResults(p.view, p.req.Policy.ProtectRecentToolResults)
	prunable := func(i int) bool {
		m := &p.view[i]
		return !keep[m.ID] && m.Kind == chat.KindNormal && !protectedResults[i]
	}

	// 1. Identical content: keep only the newest copy. Each message is
	// hashed once (a seeded 64-bit hash); a match is confirmed by comparing
	// the content itself, so a hash collision can never prune anything.
	seed := maphash.MakeSeed()
	newest := map[uint64]int{} // hash → index of its newest message
	hashes := make([]uint64, n)
	hashed := make([]bool, n)
	for i := n - 1; i >= 0; i-- {
		m := &p.view[i]
		if m.Tokens < minPruneTokens || m.Kind != chat.KindNormal {
			continue
		}
		hashes[i], hashed[i] = contentHash(seed, m), true
		if _, ok := newest[hashes[i]]; !ok {
			newest[hashes[i]] = i
		}
	}
	for i := 0; i < n && p.used() > p.target; i++ {
		m := &p.view[i]
		if !hashed[i] || !prunable(i) {
			continue
		}
		j := newest[hashes[i]]
		if j == i || !sameContent(m, &p.view[j]) {
			continue
		}
		newer := p.view[j].ID
		p.replace(i, placeholderFor(m, fmt.Sprintf("identical to the newer message %s", newer), false, names, via),
			TierPrune, "duplicate of "+newer)
	}

	// 2. Old tool results.
	for i := 0; i < n && p.used() > p.target; i++ {
		m := &p.view[i]
		if toolResultOf(m) == nil || m.Tokens < minPruneTokens || !prunable(i) {
			continue
		}
		repl, _ := p.masked(m, func(facts bool) (chat.Message, bool) { return placeholderFor(m, "", facts, names, via), true })
		p.replace(i, repl, TierPrune, "old tool output")
	}

	// 3. Long old messages keep their head and tail.
	long := max(int64(400), p.req.Usable()*5/100)
	recentFrom := max(0, n-p.req.Policy.KeepRecentMessages)
	for i := 0; i < recentFrom && p.used() > p.target; i++ {
		m := &p.view[i]
		if m.Tokens < long || !prunable(i) || toolResultOf(m) != nil {
			continue
		}
		if repl, ok := p.masked(m, func(facts bool) (chat.Message, bool) { return headTail(m, facts, via) }); ok {
			p.replace(i, repl, TierPrune, "long message: kept head and tail")
		}
	}
}

// contentHash hashes what makes two messages identical: role, text and
// tool output (a tool call's id makes a message unique).
func contentHash(seed maphash.Seed, m *chat.Message) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(string(m.Role))
	for _, part := range m.Parts {
		switch part.Type {
		case chat.PartText:
			h.WriteString("t\x00")
			h.WriteString(part.Text)
		case chat.PartToolResult:
			h.WriteString("r\x00")
			h.WriteString(part.ToolResult.Content)
		case chat.PartToolCall:
			h.WriteString("c\x00")
			h.WriteString(part.ToolCall.ID)
		}
		h.WriteByte(0)
	}
	return h.Sum64()
}

// sameContent reports whether two messages have what contentHash hashes
// in common, exactly.
func sameContent(a, b *chat.Message) bool {
	if a.Role != b.Role || len(a.Parts) != len(b.Parts) {
		return false
	}
	for k := range a.Parts {
		pa, pb := &a.Parts[k], &b.Parts[k]
		if pa.Type != pb.Type {
			return false
		}
		switch pa.Type {
		case chat.PartText:
			if pa.Text != pb.Text {
				return false
			}
		case chat.PartToolResult:
			if pa.ToolResult.Content != pb.ToolResult.Content {
				return false
			}
		case chat.PartToolCall:
			if pa.ToolCall.ID != pb.ToolCall.ID {
				return false
			}
		}
	}
	return true
}

// placeholderFor returns the stand-in of a message whose content is pruned.
// A tool result keeps its tool_call_id, so pairing holds; facts: it keeps
// its exit code, error lines and URLs (keptFacts).
func placeholderFor(m *chat.Message, why string, facts bool, names map[string]string, via Expander) chat.Message {
	// Plain concatenation, not fmt: the pruner may write tens of thousands.
	desc := strconv.FormatInt(m.Tokens, 10) + " tokens"
	if why != "" {
		desc += "; it was " + why
	}
	out := chat.Message{Role: m.Role, Name: m.Name, Kind: chat.KindPlaceholder, Metadata: m.Metadata}
	if tr := toolResultOf(m); tr != nil {
		tool := names[tr.ToolCallID]
		if tool == "" {
			tool = "a tool"
		}
		kept := ""
		if facts { // not a duplicate's: they are in its newer copy
			kept = keptFacts(tr.Content, tr.IsError, true)
		}
		if kept != "" {
			desc += "; its exit code, first error lines, tests and URLs follow"
		}
		read := readOutput(via, m.ID, "it")
		if why != "" { // a duplicate: its newer copy is in view, nothing to rerun
			read = ReadOn(via, m.ID, "it")
		}
		text := "[contextd pruned this output of " + tool + " (" + desc + "). " + read + "]" + kept
		out.Parts = []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{
			ToolCallID: tr.ToolCallID, Content: text, IsError: tr.IsError}}}
		return out
	}
	text := "[contextd pruned this " + string(m.Role) + " message (" + desc + "). " + ReadOn(via, m.ID, "it") + "]"
	out.Parts = []chat.Part{{Type: chat.PartText, Text: text}}
	// Tool calls stay, so their results keep a call to answer.
	for _, part := range m.Parts {
		if part.Type == chat.PartToolCall {
			out.Parts = append(out.Parts, part)
		}
	}
	return out
}

// Characters kept at each end of a long message.
const (
	headChars = 1200
	tailChars = 600
)

// headTail keeps the head and tail of a long message's text around a
// placeholder (with the facts of the middle, when facts); tool calls and
// other parts stay as they are.
func headTail(m *chat.Message, facts bool, via Expander) (chat.Message, bool) {
	out := chat.Message{Role: m.Role, Name: m.Name, Kind: chat.KindPlaceholder, Metadata: m.Metadata}
	cut := false
	for _, part := range m.Parts {
		if part.Type != chat.PartText || len(part.Text) <= headChars+tailChars+200 {
			out.Parts = append(out.Parts, part)
			continue
		}
		head, tail := safePrefix(part.Text, headChars), safeSuffix(part.Text, tailChars)
		kept, among := "", ""
		if facts && m.Role == chat.RoleUser { // an observation a harness sends as user text
			kept = keptFacts(part.Text[len(head):len(part.Text)-len(tail)], false, false)
		}
		if kept != "" {
			among = "; the first error lines, tests and URLs among them follow"
		}
		text := fmt.Sprintf("%s\n[contextd pruned %d characters here%s. %s]%s\n%s",
			head, len(part.Text)-len(head)-len(tail), among, ReadOn(via, m.ID, "them"), kept, tail)
		out.Parts = append(out.Parts, chat.Part{Type: chat.PartText, Text: text})
		cut = true
	}
	return out, cut
}

// safePrefix and safeSuffix cut at UTF-8 boundaries.
func safePrefix(s string, n int) string {
	for n > 0 && n < len(s) && !utf8Start(s[n]) {
		n--
	}
	return s[:n]
}

func safeSuffix(s string, n int) string {
	i := len(s) - n
	for i < len(s) && i > 0 && !utf8Start(s[i]) {
		i++
	}
	return s[i:]
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// cutPoints reports, for each index c, whether the view can be split before
// c without separating a tool result (at or after c) from its call (before
// c): 2 when view[c] starts a user turn, 1 when it is an assistant message,
// 0 when it cannot be a cut.
func cutPoints(view []chat.Message) []int {
	n := len(view)
	kind := make([]int, n+1)
	callAt := map[string]int{}
	for i, m := range view {
		for _, part := range m.Parts {
			if part.Type == chat.PartToolCall {
				callAt[part.ToolCall.ID] = i
			}
		}
	}
	// earliestCall[c] = smallest call index among results at or after c.
	earliest := n
	minCall := make([]int, n+1)
	minCall[n] = n
	for i := n - 1; i >= 0; i-- {
		if tr := toolResultOf(&view[i]); tr != nil {
			if at, ok := callAt[tr.ToolCallID]; ok && at < earliest {
				earliest = at
			}
		}
		minCall[i] = earliest
	}
	for c := 0; c < n; c++ {
		if minCall[c] < c {
			continue // a result at or after c answers a call before c
		}
		switch view[c].Role {
		case chat.RoleUser:
			kind[c] = 2
		case chat.RoleAssistant:
			kind[c] = 1
		}
	}
	kind[n] = 1
	return kind
}

// summarize replaces the head of the view (up to the kept tail) plus any
// previous summary with one summary message. The original task, pinned
// messages and the latest user message stay verbatim, with their tool-pair
// partners.
func (p *planner) summarize() error {
	n := len(p.view)
	if n == 0 {
		return nil
	}
	// Largest tail within keep_recent_tokens — and within what the target
	// leaves after the fixed part, the verbatim head and the summary —
	// snapped forward to a cut that splits neither a tool pair nor
	// (preferably) a turn (cutBefore).
	var headKept int64
	kept := p.instructions()
	for _, m := range p.view {
		if m.Pinned || m.ID == p.req.OriginalTaskID || kept[m.ID] {
			headKept += m.Tokens
		}
	}
	// Room for the summary at its cap and its trail: the cut goes deeper
	// than the tail alone needs, which keeps the view after a summary under
	// the target and the bill of the trail within 5 % (with room for the
	// summary only, +6.7 % at 16k on the corpus). The trail takes what the
	// head it summarizes needs, within its budget (Request.Trail, trailCut): a
	// large budget that the trail does not fill would leave only the
	// latest step verbatim.
	// When the request has less left than the trail's budget, the
	// summary's cap gives way first (trailAndCap).
	trail, summaryCap := p.trailAndCap()
	cutFor := func(reserve int) int {
		budget := min(p.req.Policy.KeepRecentTokens, p.target-p.req.Fixed-headKept-int64(summaryCap+reserve))
		return p.cutBefore(budget)
	}
	cut := cutFor(trail)
	if cut <= 0 {
		return nil
	}
	task := ""
	for i := range p.view {
		if p.view[i].ID == p.req.OriginalTaskID {
			task = joinText(&p.view[i])
		}
	}
	// Each cut's head is read once (keptBefore is a pass over the view).
	heads := map[int]head{}
	headAt := func(cut int) head {
		h, ok := heads[cut]
		if !ok {
			h = p.headBefore(cut)
			heads[cut] = h
		}
		return h
	}
	h := headAt(cut)
	if len(h.replaced) == 0 {
		return nil
	}
	sumID := p.req.NewID(chat.KindSummary) // the summary names its own id, and so does its trail
	via := p.req.Policy.Expander()
	input := func(h head) SummaryInput {
		return SummaryInput{Round: p.req.Round, OriginalTask: task, Previous: h.previous, PreviousFolded: h.folded, Messages: h.summarized,
			Instructions: p.req.Instructions, MaxTokens: summaryCap, AskTokens: p.req.Policy.SummaryMaxTokens, TrailMaxTokens: trailMax(trail),
			ID: sumID, Expand: via, Count: p.req.CountText, Kept: p.keptWith(h)}
	}
	trails := map[int]MeasuredTrail{} // the trail measured of each cut (at most 1 + maxTrailCuts)
	if p.req.Trail != nil {
		measure := func(cut int) int {
			t := p.req.Trail(input(headAt(cut)))
			trails[cut] = t
			return t.Tokens
		}
		if c := trailCut(cut, trail, cutFor, measure); c < cut {
			cut, h = c, headAt(c)
			if len(h.replaced) == 0 {
				return nil
			}
		}
	}
	if t, ok := trails[cut]; ok {
		// The prose yields its cap to a trail that folds: measured again.
		if tr, c := p.yieldToTrail(h, t, trail, summaryCap); c < summaryCap {
			trail, summaryCap = tr, c
			trails[cut] = p.req.Trail(input(h))
		}
	}
	in := input(h)
	var meta map[string]string
	if t, ok := trails[cut]; ok {
		in.Trail = &t.Text
		meta = foldedMeta(t.Folded)
	}
	text, err := p.req.Summarize(in)
	if err != nil {
		p.plan.SummaryFailed = err
		return nil
	}
	if header := SummaryHeader(p.req.Round, sumID, via); !strings.HasPrefix(text, header) {
		// An LLM's summary has no header of its own; it is put on before the
		// trail takes the prose's spare, which counts it.
		text = header + text
	}
	if t, ok := trails[cut]; ok {
		if more, tm, ok := p.spareToTrail(h, text, t, in); ok {
			text, meta = more, foldedMeta(tm.Folded)
		}
	}
	sum := chat.Message{ID: sumID, Role: chat.RoleUser, Kind: chat.KindSummary, Parts: []chat.Part{{Type: chat.PartText, Text: text}}, Metadata: meta}
	sum.Tokens = p.req.Count(&sum)
	if sum.Tokens >= h.before {
		return nil // nothing to gain
	}
	out := make([]chat.Message, 0, n-len(h.replaced)+1)
	placed := false
	for _, m := range p.view[:cut] {
		if h.keep[m.ID] {
			out = append(out, m)
			continue
		}
		if !placed {
			out = append(out, sum)
			placed = true
		}
	}
	out = append(out, p.view[cut:]...)
	p.setView(out)
	p.plan.New = append(p.plan.New, sum)
	p.plan.Summary = text
	p.plan.Items = append(p.plan.Items, Replacement{Tier: TierSummarize, NewID: sum.ID, Replaced: h.replaced,
		Reason: fmt.Sprintf("summary round %d of %d messages", p.req.Round, len(h.replaced)), TokensBefore: h.before, TokensAfter: sum.Tokens})
	p.addTier(TierSummarize)
	return nil
}

// closePairs adds to keep the tool-pair partners of kept messages, so a kept
// call keeps its results and a kept result keeps its call.
func closePairs(view []chat.Message, keep map[string]bool) {
	callMsg := map[string]string{}   // call id → message id
	results := map[string][]string{} // message id of the call → result message ids
	for _, m := range view {
		for _, part := range m.Parts {
			if part.Type == chat.PartToolCall {
				callMsg[part.ToolCall.ID] = m.ID
			}
		}
	}
	for _, m := range view {
		if tr := toolResultOf(&m); tr != nil {
			if owner, ok := callMsg[tr.ToolCallID]; ok {
				results[owner] = append(results[owner], m.ID)
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, m := range view {
			if !keep[m.ID] {
				continue
			}
			partners := results[m.ID]
			if tr := toolResultOf(&m); tr != nil {
				if owner, ok := callMsg[tr.ToolCallID]; ok {
					partners = append(partners, owner)
				}
			}
			for _, id := range partners {
				if !keep[id] {
					keep[id] = true
					changed = true
				}
			}
		}
	}
}

func joinText(m *chat.Message) string {
	var parts []string
	for _, part := range m.Parts {
		switch part.Type {
		case chat.PartText:
			parts = append(parts, part.Text)
		case chat.PartToolResult:
			parts = append(parts, part.ToolResult.Content)
		}
	}
	return strings.Join(parts, "\n")
}

// dropMiddle removes whole turns after the summary, oldest first, until the
// request fits; each run of dropped turns becomes one placeholder.
func (p *planner) dropMiddle() {
	keep := p.protected()
	closePairs(p.view, keep)
	start := 0
	for i, m := range p.view { // turns after the last summary
		if m.Kind == chat.KindSummary {
			start = i + 1
		}
	}
	// Turn boundaries: a user message starts a turn.
	type turn struct{ from, to int }
	var turns []turn
	for i := start; i < len(p.view); i++ {
		if i == start || (p.view[i].Role == chat.RoleUser && toolResultOf(&p.view[i]) == nil) {
			turns = append(turns, turn{from: i, to: i + 1})
		} else {
			turns[len(turns)-1].to = i + 1
		}
	}
	drop := map[int]bool{}
	var dropped []string
	var before int64
	used := p.used()
	for _, t := range turns[:max(0, len(turns)-1)] { // never the latest turn
		if used <= p.req.Usable() {
			break
		}
		if kept := p.instructions(); kept[p.view[t.from].ID] && !p.baseKept(p.view[t.from].ID) {
			t.from++ // a person's message stays; the steps that answered it may go
		}
		ok := t.from < t.to
		for i := t.from; i < t.to; i++ {
			if keep[p.view[i].ID] {
				ok = false
			}
		}
		if !ok {
			continue
		}
		for i := t.from; i < t.to; i++ {
			drop[i] = true
			dropped = append(dropped, p.view[i].ID)
			before += p.view[i].Tokens
			used -= p.view[i].Tokens
		}
	}
	if len(dropped) == 0 {
		return
	}
	phID := p.req.NewID(chat.KindPlaceholder)
	how := ReadOn(p.req.Policy.Expander(), phID, "them")
	ph := chat.Message{ID: phID, Role: chat.RoleUser, Kind: chat.KindPlaceholder, Parts: []chat.Part{{Type: chat.PartText,
		Text: fmt.Sprintf("[contextd dropped %d messages (%d tokens) here so the request fits the window. %s]", len(dropped), before, how)}}}
	ph.Tokens = p.req.Count(&ph)
	out := make([]chat.Message, 0, len(p.view))
	placed := false
	for i, m := range p.view {
		if !drop[i] {
			out = append(out, m)
			continue
		}
		if !placed {
			out = append(out, ph)
			placed = true
		}
	}
	p.setView(out)
	p.plan.New = append(p.plan.New, ph)
	p.plan.Items = append(p.plan.Items, Replacement{Tier: TierDropMiddle, NewID: ph.ID, Replaced: dropped,
		Reason: "dropped whole turns to fit the window", TokensBefore: before, TokensAfter: ph.Tokens})
	p.addTier(TierDropMiddle)
}

// tooLarge explains why the request cannot fit.
func (p *planner) tooLarge() error {
	keep := p.protected()
	var kept int64
	for _, m := range p.view {
		if keep[m.ID] {
			kept += m.Tokens
		}
	}
	largest := chat.Message{}
	for _, m := range p.view {
		if m.Tokens > largest.Tokens {
			largest = m
		}
	}
	return fmt.Errorf("%w: %d tokens needed, %d usable (window %d minus %d reserved for output); "+
		"system prompt, tools and framing alone take %d, the original task, pinned and latest user messages %d, "+
		"and the largest message (%s, %s) %d", ErrTooLarge, p.used(), p.req.Usable(), p.req.Window,
		p.req.Policy.ReservedOutputTokens, p.req.Fixed, kept, largest.ID, largest.Role, largest.Tokens)
}
