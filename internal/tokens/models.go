package tokens

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Model is one entry of the model registry.
type Model struct {
	Name            string   `json:"name"`
	Aliases         []string `json:"aliases,omitempty"`
	Provider        string   `json:"provider"`
	ContextWindow   int64    `json:"context_window"`
	MaxOutputTokens int64    `json:"max_output_tokens"`
	Encoding        string   `json:"encoding"`
	// Exact is true when Encoding is the model's own tokenizer.
	Exact bool `json:"exact"`
	// ExpectedError is the expected relative error of local counts against
	// the provider's (0 when exact).
	ExpectedError float64 `json:"expected_error"`
	// Framing overrides the default chat framing for this model.
	Framing *Framing `json:"framing,omitempty"`
	// Pricing is the list price, for the ledger's estimated spend; nil when
	// unknown.
	Pricing *Pricing `json:"pricing,omitempty"`
	// Template names the model's own chat template (template.go), which
	// then frames chat requests instead of Framing.
	Template string `json:"template,omitempty"`
}

// Framing is the token overhead a chat request adds around its content, after
// OpenAI's published counting rules ("How to count tokens with tiktoken").
type Framing struct {
	// PerMessage tokens wrap every message (<|start|>, <|message|>, <|end|>).
	PerMessage int `json:"per_message"`
	// PerName is added when a message has a name.
	PerName int `json:"per_name"`
	// ReplyPriming is added once per request (<|start|>assistant<|message|>).
	ReplyPriming int `json:"reply_priming"`
	// PerToolCall is added for every tool call an assistant message makes.
	PerToolCall int `json:"per_tool_call"`
	// Tool-definition rule: FuncInit per tool, PropInit per tool with
	// properties, PropKey per property, EnumInit per enum, EnumItem per enum
	// value, FuncEnd once when there are tools.
	FuncInit int `json:"func_init"`
	PropInit int `json:"prop_init"`
	PropKey  int `json:"prop_key"`
	EnumInit int `json:"enum_init"`
	EnumItem int `json:"enum_item"`
	FuncEnd  int `json:"func_end"`
	// ToolsJSON: the provider reads each tool definition as its JSON
	// ({"description","input_schema","name"}, keys sorted, compact), as
	// Anthropic renders tools, instead of OpenAI's function rule above.
	ToolsJSON bool `json:"tools_json,omitempty"`

	template chatTemplate // set by FramingOf for a model with a Template
}

// DefaultFraming is the framing of gpt-4o and later OpenAI chat models.
var DefaultFraming = Framing{
	PerMessage: 3, PerName: 1, ReplyPriming: 3, PerToolCall: 3,
	FuncInit: 7, PropInit: 3, PropKey: 3, EnumInit: -3, EnumItem: 3, FuncEnd: 12,
}

// legacyFraming is the framing of gpt-4 and gpt-3.5-turbo.
var legacyFraming = Framing{
	PerMessage: 3, PerName: 1, ReplyPriming: 3, PerToolCall: 3,
	FuncInit: 10, PropInit: 3, PropKey: 3, EnumInit: -3, EnumItem: 3, FuncEnd: 12,
}

// DefaultModel is what an unknown model name is counted as.
var DefaultModel = Model{
	Name: "default", Provider: "unknown", ContextWindow: 128_000, MaxOutputTokens: 4_096,
	Encoding: CL100KBase, Exact: false, ExpectedError: 0.25,
}

// builtinModels is the registry shipped in the binary. Approximate encodings
// carry the error we expect against the provider's own count; calibration
// from reported usage narrows it.
func builtinModels() []Model {
	openai := func(name string, window, out int64, enc string, aliases ...string) Model {
		return Model{Name: name, Aliases: aliases, Provider: "openai", ContextWindow: window,
			MaxOutputTokens: out, Encoding: enc, Exact: true}
	}
	approx := func(provider, name string, window, out int64, errFrac float64, aliases ...string) Model {
		return Model{Name: name, Aliases: aliases, Provider: provider, ContextWindow: window,
			MaxOutputTokens: out, Encoding: CL100KBase, Exact: false, ExpectedError: errFrac}
	}
	legacy := func(m Model) Model { f := legacyFraming; m.Framing = &f; return m }
	models := append([]Model{
		openai("gpt-4o", 128_000, 16_384, O200KBase, "chatgpt-4o-latest"),
		openai("gpt-4o-mini", 128_000, 16_384, O200KBase),
		openai("gpt-4.1", 1_047_576, 32_768, O200KBase),
		openai("gpt-4.1-mini", 1_047_576, 32_768, O200KBase),
		openai("gpt-4.1-nano", 1_047_576, 32_768, O200KBase),
		openai("gpt-4.5-preview", 128_000, 16_384, O200KBase, "gpt-4.5"),
		openai("gpt-5", 400_000, 128_000, O200KBase, "gpt-5-chat-latest"),
		openai("gpt-5-mini", 400_000, 128_000, O200KBase),
		openai("gpt-5-nano", 400_000, 128_000, O200KBase),
		openai("gpt-5-codex", 400_000, 128_000, O200KBase),
		openai("gpt-5.1", 400_000, 128_000, O200KBase, "gpt-5.1-chat-latest"),
		openai("gpt-5.1-codex", 400_000, 128_000, O200KBase),
		openai("o1", 200_000, 100_000, O200KBase),
		openai("o3", 200_000, 100_000, O200KBase),
		openai("o3-mini", 200_000, 100_000, O200KBase),
		openai("o4-mini", 200_000, 100_000, O200KBase),
		legacy(openai("gpt-4", 8_192, 8_192, CL100KBase)),
		legacy(openai("gpt-4-32k", 32_768, 8_192, CL100KBase)),
		legacy(openai("gpt-4-turbo", 128_000, 4_096, CL100KBase, "gpt-4-turbo-preview")),
		legacy(openai("gpt-3.5-turbo", 16_385, 4_096, CL100KBase)),
		approx("anthropic", "claude-3-5-sonnet", 200_000, 8_192, 0.20, "claude-3.5-sonnet", "claude-3-5-sonnet-latest"),
		approx("anthropic", "claude-3-5-haiku", 200_000, 8_192, 0.20, "claude-3.5-haiku", "claude-3-5-haiku-latest"),
		approx("anthropic", "claude-3-7-sonnet", 200_000, 64_000, 0.20, "claude-3.7-sonnet", "claude-3-7-sonnet-latest"),
		approx("anthropic", "claude-sonnet-4", 200_000, 64_000, 0.20, "claude-sonnet-4-0", "claude-4-sonnet"),
		approx("anthropic", "claude-sonnet-4-5", 200_000, 64_000, 0.20, "claude-sonnet-4.5"),
		approx("anthropic", "claude-opus-4", 200_000, 32_000, 0.20, "claude-opus-4-0", "claude-4-opus"),
		approx("anthropic", "claude-opus-4-1", 200_000, 32_000, 0.20, "claude-opus-4.1"),
		approx("anthropic", "claude-opus-4-5", 200_000, 64_000, 0.20, "claude-opus-4.5"),
		approx("anthropic", "claude-haiku-4-5", 200_000, 64_000, 0.20, "claude-haiku-4.5"),
		gemini("gemini-2.5-pro", 1_048_576, 65_536),
		gemini("gemini-2.5-flash", 1_048_576, 65_536),
		gemini("gemini-2.5-flash-lite", 1_048_576, 65_536),
		gemini("gemini-2.0-flash", 1_048_576, 8_192),
		gemini("gemini-2.0-flash-lite", 1_048_576, 8_192),
		approx("mistral", "mistral-large", 131_072, 8_192, 0.15, "mistral-large-latest", "mistral-large-2411"),
	}, openWeightModels()...)
	for i := range models {
		if p, ok := builtinPrices[models[i].Name]; ok {
			models[i].Pricing = &p
		}
	}
	return models
}

// Registry resolves model names to models. It is immutable once built.
type Registry struct {
	models []Model           // sorted by name
	byName map[string]*Model // canonical names and aliases, lower case
}

// NewRegistry builds the registry from the built-in models plus overrides:
// an override with the name (or alias) of a built-in model replaces it, any
// other adds a model.
func NewRegistry(overrides []Model) (*Registry, error) {
	models := builtinModels()
	for i, o := range overrides {
		if err := checkModel(o); err != nil {
			return nil, fmt.Errorf("model %d (%q): %w", i, o.Name, err)
		}
		replaced := false
		for j := range models {
			if strings.EqualFold(models[j].Name, o.Name) || slices.ContainsFunc(models[j].Aliases, func(a string) bool { return strings.EqualFold(a, o.Name) }) {
				models[j], replaced = o, true
				break
			}
		}
		if !replaced {
			models = append(models, o)
		}
	}
	slices.SortFunc(models, func(a, b Model) int { return strings.Compare(a.Name, b.Name) })
	r := &Registry{models: models, byName: make(map[string]*Model)}
	for i := range r.models {
		m := &r.models[i]
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			key := strings.ToLower(n)
			if prev, dup := r.byName[key]; dup && prev != m {
				return nil, fmt.Errorf("model name %q is used by both %q and %q", n, prev.Name, m.Name)
			}
			r.byName[key] = m
		}
	}
	return r, nil
}

func checkModel(m Model) error {
	switch {
	case m.Name == "":
		return fmt.Errorf("name is required")
	case m.ContextWindow <= 0:
		return fmt.Errorf("context_window must be positive")
	case m.MaxOutputTokens < 0 || m.MaxOutputTokens > m.ContextWindow:
		return fmt.Errorf("max_output_tokens must be between 0 and context_window")
	case !slices.Contains(EncodingNames, m.Encoding):
		return fmt.Errorf("encoding %q is not one of %s", m.Encoding, strings.Join(EncodingNames, ", "))
	case m.Template != "" && chatTemplates[m.Template] == nil:
		return fmt.Errorf("template %q is unknown", m.Template)
	case m.ExpectedError < 0 || m.ExpectedError > 1:
		return fmt.Errorf("expected_error must be between 0 and 1")
	case m.Pricing != nil && !m.Pricing.valid():
		return fmt.Errorf("pricing: every price must be a finite number, 0 or more")
	}
	return nil
}

// LoadModelsFile reads registry overrides from a JSON file:
// {"models": [{"name": ..., "context_window": ..., ...}]}.
func LoadModelsFile(path string) ([]Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read models file: %w", err)
	}
	var f struct {
		Models []Model `json:"models"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse models file %s: %w", path, err)
	}
	return f.Models, nil
}

// Models returns every model, sorted by name.
func (r *Registry) Models() []Model { return r.models }

// datedSuffix matches snapshot suffixes: -2024-08-06, -20250514, -latest.
var datedSuffix = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// Lookup resolves a model name. It accepts provider prefixes
// ("openai/gpt-4o", "anthropic/claude-sonnet-4.5"), dated snapshots
// ("gpt-4o-2024-08-06", "claude-sonnet-4-20250514") and any letter case.
// Unknown names return DefaultModel (named as asked) and false.
func (r *Registry) Lookup(name string) (Model, bool) {
	key := strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		key = key[i+1:]
	}
	for {
		if m, ok := r.byName[key]; ok {
			return *m, true
		}
		trimmed := datedSuffix.ReplaceAllString(key, "")
		if trimmed == key {
			break
		}
		key = trimmed
	}
	m := DefaultModel
	m.Name = name
	return m, false
}

// FramingOf returns the framing of a model.
func FramingOf(m Model) Framing {
	if t, ok := chatTemplates[m.Template]; ok {
		return Framing{ReplyPriming: t.replyPriming(), template: t}
	}
	if m.Framing != nil {
		return *m.Framing
	}
	return DefaultFraming
}
