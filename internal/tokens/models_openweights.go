package tokens

import "strings"

// openWeightModels are the open-weight models counted exactly with their own
// tokenizer (families.go). Windows are the model cards' native context
// lengths (what vLLM serves by default); a models file overrides them, e.g.
// for a YaRN-extended deployment.
func openWeightModels() []Model {
	exact := func(provider, name string, window, out int64, enc string, aliases ...string) Model {
		return Model{Name: name, Aliases: aliases, Provider: provider, ContextWindow: window,
			MaxOutputTokens: out, Encoding: enc, Exact: true}
	}
	var ms []Model
	// Llama 3.0–3.3 share one tokenizer.
	for _, m := range []struct {
		name   string
		window int64
	}{
		{"llama-3-8b", 8_192}, {"llama-3-70b", 8_192},
		{"llama-3.1-8b", 131_072}, {"llama-3.1-70b", 131_072}, {"llama-3.1-405b", 131_072},
		{"llama-3.2-1b", 131_072}, {"llama-3.2-3b", 131_072},
		{"llama-3.3-70b", 131_072},
	} {
		aliases := []string{m.name + "-instruct", "meta-" + m.name + "-instruct"}
		if m.name == "llama-3.3-70b" {
			aliases = append(aliases, "llama-3.3-70b-versatile")
		}
		lm := exact("meta", m.name, m.window, min(m.window, 8_192), Llama3, aliases...)
		lm.Template = TemplateLlama31
		if m.window == 8_192 { // Llama 3.0
			lm.Template = TemplateLlama3
		}
		ms = append(ms, lm)
	}
	// Qwen 2.5 and Qwen3 share one vocabulary; Qwen3 added four tokens.
	qwen25 := func(name string) Model {
		m := exact("qwen", name, 32_768, 8_192, Qwen25, name+"-instruct")
		m.Template = TemplateQwen25
		return m
	}
	for _, size := range []string{"0.5b", "1.5b", "3b", "7b", "14b", "32b", "72b"} {
		ms = append(ms, qwen25("qwen2.5-"+size))
	}
	for _, size := range []string{"7b", "14b", "32b"} {
		ms = append(ms, qwen25("qwen2.5-coder-"+size))
	}
	for _, size := range []string{"0.6b", "1.7b", "4b", "8b", "14b", "32b", "30b-a3b", "235b-a22b"} {
		m := exact("qwen", "qwen3-"+size, 32_768, 8_192, Qwen2)
		m.Template = TemplateQwen3
		ms = append(ms, m)
	}
	deepseek := exact("deepseek", "deepseek-v3", 131_072, 8_192, DeepSeekV3, "deepseek-chat", "deepseek-v3-0324")
	deepseek.Template = TemplateDeepSeekV3
	// R1's own template is not in a package we can check against; V3's is
	// the closest (see docs/tokens.md), so R1's counts are approximate: the
	// tokenizer is R1's own, the framing V3's, and reasoning left in earlier
	// assistant turns (which R1's template drops) is counted.
	r1 := exact("deepseek", "deepseek-r1", 131_072, 32_768, DeepSeekV3, "deepseek-reasoner", "deepseek-r1-0528")
	r1.Template = TemplateDeepSeekV3
	r1.Exact, r1.ExpectedError = false, r1ExpectedError
	ms = append(ms, deepseek, r1)
	for _, name := range []string{"gpt-oss-20b", "gpt-oss-120b"} {
		m := exact("openai", name, 131_072, 32_768, O200KHarmony)
		m.Template = TemplateHarmony
		ms = append(ms, m)
	}
	// Gemma 3 (text): 32K for 1B, 128K for the others.
	for _, m := range []struct {
		size   string
		window int64
	}{{"1b", 32_768}, {"4b", 131_072}, {"12b", 131_072}, {"27b", 131_072}} {
		g := exact("google", "gemma-3-"+m.size, m.window, 8_192, Gemma3, "gemma-3-"+m.size+"-it", "gemma3:"+m.size)
		g.Template = TemplateGemma3
		ms = append(ms, g)
	}
	return ms
}

// Gemini 2.x shares Gemma 3's vocabulary (Google, Gemma 3 technical
// report): counted with it, a Gemini text's count differs from the API's by
// what Gemini adds around it, which we cannot check offline (no provider
// count here yet); ReportUsage calibration corrects it per session.
//
// Without Gemma 3's vocabulary imported, Gemma and Gemini models are counted
// with cl100k_base. gemma3FallbackError is what that costs, measured on the
// golden texts against Gemma 3's own counts (median 12.6 %, 90th percentile
// 23 %; TestFallbackErrorsAreMeasured keeps it above the 90th percentile).
const (
	geminiExpectedError = 0.05
	// r1ExpectedError: V3's framing for R1 (±2 tokens a request) plus any
	// earlier-turn reasoning the caller keeps, which R1's template drops.
	r1ExpectedError     = 0.10
	gemma3FallbackError = 0.25
)

func gemini(name string, window, out int64) Model {
	return Model{Name: name, Provider: "google", ContextWindow: window, MaxOutputTokens: out,
		Encoding: Gemma3, ExpectedError: geminiExpectedError}
}

// WithAvailable returns the registry with every model whose encoding's
// vocabulary is not at hand (Llama 3 or Gemma 3 before it is imported) counted with
// cl100k_base instead, approximate, with that family's expected error, and
// OpenAI's framing (cl100k_base would count the template's special tokens as
// several tokens each). Unchanged models are shared. It also returns the names of the changed
// models.
func (r *Registry) WithAvailable(available func(encoding string) bool) (*Registry, []string) {
	var changed []string
	models := make([]Model, len(r.models))
	copy(models, r.models)
	for i := range models {
		m := &models[i]
		if available(m.Encoding) {
			continue
		}
		var fallback float64
		if fam, ok := bpeFamilies[m.Encoding]; ok {
			fallback = fam.fallbackError
		} else if m.Encoding == Gemma3 {
			fallback = gemma3FallbackError // Gemma 3 and Gemini alike
		} else {
			continue
		}
		m.Encoding, m.Exact, m.ExpectedError, m.Template = CL100KBase, false, fallback, ""
		changed = append(changed, m.Name)
	}
	if len(changed) == 0 {
		return r, nil
	}
	out := &Registry{models: models, byName: make(map[string]*Model, len(r.byName))}
	for i := range out.models {
		m := &out.models[i]
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			out.byName[strings.ToLower(n)] = m
		}
	}
	return out, changed
}
