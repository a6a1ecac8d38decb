package summarize

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// Providers of LLM summarizers.
const (
	ProviderOpenAI    = "openai"    // any OpenAI-compatible chat-completions API: OpenAI, OpenRouter, vLLM, Ollama
	ProviderAnthropic = "anthropic" // Anthropic's Messages API
)

// Endpoint is how to reach one provider. The API key is never logged or
// returned; it comes from the environment or a file (see app config).
type Endpoint struct {
	BaseURL    string
	APIKey     string
	Timeout    time.Duration // per attempt
	MaxRetries int
	HTTPClient *http.Client
}

const systemPrompt = `You compact the history of an AI agent's conversation so the agent can continue its work
with less context. Write a faithful, dense summary in Markdown with exactly these sections, in this order:

## Original task
(one line naming it: the conversation keeps the request itself verbatim)
## Completed work
(what was done, as bullets, with every file path touched; contextd appends the exact list of files,
commands, tests and errors itself)
## Decisions
## Errors and resolutions
## Current state
## Pending work

Integrate the previous summary if one is given: keep what still matters from it. Keep file paths, commands,
identifiers and error messages exact. Do not invent anything. Answer with the summary only.`

// OpenAI summarizes with an OpenAI-compatible chat-completions API.
type OpenAI struct {
	client openai.Client
	model  string
}

// NewOpenAI returns a summarizer for model at ep (BaseURL empty: OpenAI).
func NewOpenAI(ep Endpoint, model string) *OpenAI {
	opts := []openaioption.RequestOption{openaioption.WithAPIKey(ep.APIKey), openaioption.WithMaxRetries(ep.MaxRetries),
		openaioption.WithRequestTimeout(ep.Timeout)}
	if ep.BaseURL != "" {
		opts = append(opts, openaioption.WithBaseURL(ep.BaseURL))
	}
	if ep.HTTPClient != nil {
		opts = append(opts, openaioption.WithHTTPClient(ep.HTTPClient))
	}
	return &OpenAI{client: openai.NewClient(opts...), model: model}
}

// Summarize implements Summarizer.
func (o *OpenAI) Summarize(ctx context.Context, in compaction.SummaryInput) (string, error) {
	text, _, err := o.SummarizeMetered(ctx, in)
	return text, err
}

// SummarizeMetered implements Metered: the usage comes from the response's
// usage block (prompt_tokens includes the cached ones).
func (o *OpenAI) SummarizeMetered(ctx context.Context, in compaction.SummaryInput) (string, Usage, error) {
	text, u, cut, err := o.ask(ctx, systemPrompt, userPrompt(in), askTokens(in))
	text = withinCap(wholeLines(text, cut), in)
	if err == nil && text == "" {
		err = fmt.Errorf("openai-compatible model (%s): %w", o.model, ErrEmptyAnswer)
	}
	return text, u, err
}

// Anthropic summarizes with Anthropic's Messages API.
type Anthropic struct {
	client anthropic.Client
	model  string
}

// NewAnthropic returns a summarizer for model at ep (BaseURL empty:
// api.anthropic.com).
func NewAnthropic(ep Endpoint, model string) *Anthropic {
	return &Anthropic{client: anthropic.NewClient(anthropicOptions(ep)...), model: model}
}

func anthropicOptions(ep Endpoint) []anthropicoption.RequestOption {
	opts := []anthropicoption.RequestOption{anthropicoption.WithAPIKey(ep.APIKey), anthropicoption.WithMaxRetries(ep.MaxRetries),
		anthropicoption.WithRequestTimeout(ep.Timeout)}
	if ep.BaseURL != "" {
		opts = append(opts, anthropicoption.WithBaseURL(ep.BaseURL))
	}
	if ep.HTTPClient != nil {
		opts = append(opts, anthropicoption.WithHTTPClient(ep.HTTPClient))
	}
	return opts
}

// Summarize implements Summarizer.
func (a *Anthropic) Summarize(ctx context.Context, in compaction.SummaryInput) (string, error) {
	text, _, err := a.SummarizeMetered(ctx, in)
	return text, err
}

// SummarizeMetered implements Metered, from the response's usage block.
func (a *Anthropic) SummarizeMetered(ctx context.Context, in compaction.SummaryInput) (string, Usage, error) {
	text, u, cut, err := a.ask(ctx, systemPrompt, userPrompt(in), askTokens(in))
	text = withinCap(wholeLines(text, cut), in)
	if err == nil && text == "" {
		err = fmt.Errorf("anthropic model (%s): %w", a.model, ErrEmptyAnswer)
	}
	return text, u, err
}

// wholeLines is an LLM's summary less the line its max_tokens cut off
// (cut), if any: a summary never cuts a word, an identifier or a path
// (docs/compaction.md), and where the summary's cap gives way to the trail
// (compaction's trailAndCap) the model is asked for a quarter of
// summary_max_tokens, which an answer outruns more often. An answer of one
// cut line leaves nothing (ErrEmptyAnswer: the extractive summary instead).
func wholeLines(text string, cut bool) string {
	if !cut {
		return text
	}
	i := strings.LastIndexByte(text, '\n')
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(text[:i])
}

// Usage is what one LLM call was billed, from the provider's usage block.
type Usage struct {
	Model                                string
	Input, CacheRead, CacheWrite, Output int64 // Input is the uncached part
}

// Metered is a Summarizer that also returns what its call was billed, so
// the compaction's cost lands in the session's ledger.
type Metered interface {
	SummarizeMetered(ctx context.Context, in compaction.SummaryInput) (string, Usage, error)
}

// humanIn says, for each message of in.Messages, whether a person wrote
// it (chat.HumanAuthoredIn, the conversation's first message being the
// original task, which the view keeps): a framework's observation sent as
// user text (mini-swe-agent's <returncode>, SWE-agent's prompt line) is
// not, and pinned as "the latest user request" it re-sent a command's
// output in every request until the next compaction.
func humanIn(in compaction.SummaryInput) []bool {
	msgs := make([]chat.Message, 0, len(in.Messages)+1)
	msgs = append(msgs, chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "task"}}})
	return chat.HumanAuthoredIn(append(msgs, in.Messages...))[1:]
}

// PinFacts makes sure an LLM summary kept what must survive: the latest
// request a person wrote and the file paths written in the
// summarized work and carried by the previous summary (most recent first,
// within the files budget, as the extractive summary keeps them), and the
// fold lines of the lists the previous summary carried (llmfold.go).
// Whatever is missing is appended verbatim, and the answer's last whole
// lines make room for it within the summary's cap (pinRoom).
func PinFacts(summary string, in compaction.SummaryInput) string {
	// The previous summary is read once: its prose (its trail is not
	// prose: the new trail merges it) and the sections of that prose.
	prevProse, _ := withoutTrail(in.Previous)
	prev := parseSections(prevProse)
	copied, folds := previousFolds(prev)
	answer := unfoldAnswer(summary, copied)
	latest := ""
	for i, human := range humanIn(in) {
		if human {
			latest = textOf(&in.Messages[i])
		}
	}
	// The previous summary may be an LLM's, which names files in its prose:
	// they carry over too, after its Files section. A URL is no path: a
	// path read out of one would lose its scheme and host's slash.
	prose := urlRe.ReplaceAllString(prevProse, " ")
	// And the paths its trail showed, which this trail may fold (as the
	// extractive Files carries them).
	files, _ := previousFiles(prev)
	carried := append(append(files, pathRe.FindAllString(prose, maxFiles)...), trailFiles(in.Previous)...)
	trail := trailOf(in)
	inTrail := heldPaths(trail)
	kept, _ := fitPaths(recentPaths(in.Messages, carried), filesBudget(in.MaxTokens), countOrEstimate(in))
	pinned := func(summary string) string {
		// The previous summary's fold lines go into the answer's sections
		// before anything is added, never into a request pinned verbatim;
		// Files' goes last in the Files pinned below where the answer has
		// none.
		folds, filesFold := folds, ""
		if i := slices.IndexFunc(folds, func(f foldOf) bool { return f.sec == SecFiles }); i >= 0 && sectionAt(summary, SecFiles) < 0 {
			filesFold = folds[i].line
			folds = slices.Delete(slices.Clone(folds), i, i+1)
		}
		summary = placeFolds(summary, folds)
		var add []string
		// The original task is not repeated: every tier keeps it in the view.
		if latest != "" && latest != strings.TrimSpace(in.OriginalTask) && !strings.Contains(summary, latest) {
			add = append(add, "## Latest user request (verbatim)\n"+latest)
		}
		var missing []string
		inSummary := heldPaths(summary)
		for _, f := range kept {
			if !inSummary(f) && !inTrail(f) {
				missing = append(missing, "- "+f)
			}
		}
		if filesFold != "" {
			missing = append(missing, filesFold)
		}
		if len(missing) > 0 {
			add = append(add, "## "+SecFiles+"\n"+strings.Join(missing, "\n"))
		}
		if len(add) > 0 {
			summary += "\n\n" + strings.Join(add, "\n\n")
		}
		return summary
	}
	return withTrail(pinRoom(answer, pinned, in), trail)
}

// pinRoom is pinned(answer) (the answer with what PinFacts pins), with
// the answer less its last whole lines while that is over the summary's
// cap (withinCap held the answer alone to it): what is pinned takes its
// room out of the answer, not beyond the cap the planner left the summary
// (the view's bound counts it, TestSummaryOvershootIsBounded): at a cap
// of 200, an answer of 195 tokens and five carried fold lines took 297
// (TestLLMSummaryFoldLinesStayWithinCap), and the paths pinned up to half
// the cap more. Where what is pinned alone is over the cap (a long latest
// request, a summary_max_tokens far under 800) the answer is left whole,
// over it, as the extractive summary's floor is. O(log lines) pinnings
// (more only where a shorter answer pins more: it held the request).
func pinRoom(answer string, pinned func(string) string, in compaction.SummaryInput) string {
	count := countOrEstimate(in)
	fits := func(s string) bool { return count(strings.TrimSpace(pinned(s))) <= in.MaxTokens }
	within := linesWithin(answer, fits) // the answer itself when it fits
	if within == "" {
		within = answer
	}
	return pinned(within)
}
