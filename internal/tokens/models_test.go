package tokens_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/tokens"
)

func TestLookup(t *testing.T) {
	reg, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		known      bool
	}{
		{"gpt-4o", "gpt-4o", true},
		{"GPT-4o", "gpt-4o", true},
		{"gpt-4o-2024-08-06", "gpt-4o", true},
		{"openai/gpt-4o-mini", "gpt-4o-mini", true},
		{"claude-sonnet-4-20250514", "claude-sonnet-4", true},
		{"anthropic/claude-sonnet-4.5", "claude-sonnet-4-5", true},
		{"claude-3-5-sonnet-latest", "claude-3-5-sonnet", true},
		{"claude-3-5-sonnet-20241022", "claude-3-5-sonnet", true},
		{"gemini-2.5-flash", "gemini-2.5-flash", true},
		{"mistral-large-2411", "mistral-large", true},
		{"acme-7b", "acme-7b", false},
		{"", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, known := reg.Lookup(tc.name)
			if m.Name != tc.want || known != tc.known {
				t.Errorf("got %q known=%v, want %q known=%v", m.Name, known, tc.want, tc.known)
			}
			if !known && (m.ContextWindow != 128_000 || m.Encoding != tokens.CL100KBase || m.Exact) {
				t.Errorf("unknown model must use the default: %+v", m)
			}
		})
	}
}

func TestModelsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "models.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	overrides, err := tokens.LoadModelsFile(write(`{"models":[
		{"name":"gpt-4o","provider":"openai","context_window":64000,"max_output_tokens":4096,"encoding":"o200k_base","exact":true},
		{"name":"acme-7b","aliases":["acme"],"provider":"acme","context_window":32768,"max_output_tokens":2048,"encoding":"cl100k_base","expected_error":0.3}]}`))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tokens.NewRegistry(overrides)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := reg.Lookup("gpt-4o"); m.ContextWindow != 64000 {
		t.Errorf("override not applied: %+v", m)
	}
	if m, ok := reg.Lookup("acme"); !ok || m.Name != "acme-7b" || m.ContextWindow != 32768 {
		t.Errorf("added model: %+v %v", m, ok)
	}

	for name, body := range map[string]string{
		"unknown field":   `{"models":[{"name":"x","context_window":1,"encoding":"cl100k_base","windw":3}]}`,
		"bad encoding":    `{"models":[{"name":"x","context_window":100,"encoding":"p50k_base"}]}`,
		"no window":       `{"models":[{"name":"x","encoding":"cl100k_base"}]}`,
		"output > window": `{"models":[{"name":"x","context_window":100,"max_output_tokens":200,"encoding":"cl100k_base"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			o, err := tokens.LoadModelsFile(write(body))
			if err == nil {
				_, err = tokens.NewRegistry(o)
			}
			if err == nil {
				t.Error("want an error")
			}
		})
	}
}

func TestImageTokens(t *testing.T) {
	for _, tc := range []struct {
		img  chat.Image
		want int64
	}{
		{chat.Image{Detail: "low", Width: 4096, Height: 4096}, 85},
		{chat.Image{}, 765},                           // unknown size: 1024×1024
		{chat.Image{Width: 1024, Height: 1024}, 765},  // 768×768: 4 tiles
		{chat.Image{Width: 2048, Height: 4096}, 1105}, // 1024×2048 → 768×1536: 6 tiles
		{chat.Image{Width: 512, Height: 512}, 255},    // one tile
	} {
		if got := tokens.ImageTokens(&tc.img); got != tc.want {
			t.Errorf("%+v: %d, want %d", tc.img, got, tc.want)
		}
	}
}

func TestCountTools(t *testing.T) {
	enc := mustLoad(t, tokens.O200KBase)
	tools := []chat.Tool{{
		Name: "get_weather", Description: "Get the weather.",
		Parameters: `{"type":"object","properties":{"city":{"type":"string","description":"City name."},"unit":{"type":"string","enum":["c","f"]}}}`,
	}}
	total, per := tokens.CountTools(enc, tokens.DefaultFraming, "", tools)
	f := tokens.DefaultFraming
	want := f.FuncInit + enc.Count("get_weather:Get the weather") + f.PropInit +
		f.PropKey + enc.Count("city:string:City name") +
		f.PropKey + f.EnumInit + 2*f.EnumItem + enc.Count("c") + enc.Count("f") + enc.Count("unit:string:")
	if len(per) != 1 || per[0].Tokens != int64(want) || total != int64(want+f.FuncEnd) {
		t.Errorf("got total %d per %+v, want %d (+%d)", total, per, want, f.FuncEnd)
	}
	if total, per := tokens.CountTools(enc, f, "", nil); total != 0 || per != nil {
		t.Errorf("no tools must cost nothing: %d", total)
	}
}

// DeepSeek R1 is counted with its own tokenizer but V3's chat template (R1's
// is in no pinned package), so it is registered approximate with a stated
// error, while V3 itself stays exact.
func TestDeepSeekR1Approximate(t *testing.T) {
	reg, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"deepseek-r1", "deepseek-reasoner", "deepseek-r1-0528"} {
		m, ok := reg.Lookup(name)
		if !ok || m.Name != "deepseek-r1" || m.Exact || m.ExpectedError <= 0 || m.Encoding != tokens.DeepSeekV3 {
			t.Errorf("%s: %+v", name, m)
		}
	}
	if v3, ok := reg.Lookup("deepseek-v3"); !ok || !v3.Exact || v3.ExpectedError != 0 {
		t.Errorf("deepseek-v3: %+v", v3)
	}
}
