package tokens

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// flatSchema is an ordinary parameters schema of about size bytes: one
// level of string properties with descriptions.
func flatSchema(size int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","description":"the path of file %d to read"}`, i, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

// hostileSchemas are parameters schemas of about size bytes shaped to make
// a renderer's work grow faster than their size (issue 24): properties
// nested 62 levels deep with siblings at every level, nullable oneOf
// variants nested in one another, and arrays nested in type and enum.
func hostileSchemas(size int) map[string]string {
	nestedProps := func(depth int) string {
		per := size / depth / 60
		var b strings.Builder
		for d := range depth {
			b.WriteString(`{"type":"object","description":"level","properties":{`)
			for i := range per {
				fmt.Fprintf(&b, `"s%d":{"type":"string","description":"a"},`, i)
			}
			fmt.Fprintf(&b, `"n%d":`, d)
		}
		b.WriteString(`{"type":"string"}`)
		b.WriteString(strings.Repeat(`}}`, depth))
		return b.String()
	}
	nestedOneOf := func(depth int) string {
		per := size / depth / 40
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{"x":`)
		for range depth {
			b.WriteString(`{"nullable":true,"oneOf":[`)
			for range per {
				b.WriteString(`{"type":"string","description":"a"},`)
			}
		}
		b.WriteString(`{"type":"string"}`)
		b.WriteString(strings.Repeat(`]}`, depth))
		b.WriteString(`}}`)
		return b.String()
	}
	nestedArrays := func(key string, depth int) string {
		per := size / depth / 4
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{"x":{"type":"string","` + key + `":`)
		for range depth {
			b.WriteString(`[`)
			b.WriteString(strings.Repeat(`"a",`, per))
		}
		b.WriteString(`"z"`)
		b.WriteString(strings.Repeat(`]`, depth))
		b.WriteString(`}}}`)
		return b.String()
	}
	return map[string]string{
		"nested properties": nestedProps(62),
		"nested oneOf":      nestedOneOf(60),
		"arrays in type":    nestedArrays("type", 2000),
		"arrays in enum":    nestedArrays("enum", 2000),
	}
}

// countAlloc is the bytes counting tools allocates (the least of three
// runs, so a collection in between does not count).
func countAlloc(enc *Encoding, fr Framing, tools []chat.Tool) uint64 {
	best := ^uint64(0)
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		CountRequest(enc, fr, "", tools, nil)
		runtime.ReadMemStats(&after)
		best = min(best, after.TotalAlloc-before.TotalAlloc)
	}
	return best
}

// TestToolSchemasAreLinear: counting tools whose parameters are any schema
// allocates at most 3 times what a flat schema of the same size does, for
// gpt-oss's TypeScript rendering (harmony) and OpenAI's rule (scalarText).
// Before the fix, 62 nested levels of properties
// rendered each level into its own buffer and copied it into its parent,
// and arrays nested in type re-joined the whole text at every level.
func TestToolSchemasAreLinear(t *testing.T) {
	const size = 256 << 10
	harmonyEnc, harmonyFr := templateUnderTest(t, TemplateHarmony)
	openaiEnc, err := loadTestEncoding(t, O200KBase)
	if err != nil {
		t.Fatal(err)
	}
	framings := []struct {
		name string
		enc  *Encoding
		fr   Framing
	}{{"harmony", harmonyEnc, harmonyFr}, {"openai", openaiEnc, DefaultFraming}}
	flat := flatSchema(size)
	for _, f := range framings {
		flatCost := countAlloc(f.enc, f.fr, []chat.Tool{{Name: "f", Parameters: flat}})
		for name, schema := range hostileSchemas(size) {
			t.Run(f.name+"/"+name, func(t *testing.T) {
				tools := []chat.Tool{{Name: "f", Parameters: schema}}
				// Scale to the flat schema's size.
				cost := float64(countAlloc(f.enc, f.fr, tools)) * float64(len(flat)) / float64(len(schema))
				ratio := cost / float64(flatCost)
				t.Logf("%s: %.2f× a flat schema's allocation", name, ratio)
				if ratio > 3 {
					t.Errorf("a %d-byte schema (%s) allocates %.1f× what a flat one of the same size does; want at most 3×", len(schema), name, ratio)
				}
			})
		}
	}
}

// TestToolBytesChargesRendering: a schema whose rendering is larger than
// its JSON (gpt-oss indents each level) is charged what it renders, and a
// flat one at least its own size.
func TestToolBytesChargesRendering(t *testing.T) {
	_, harmony := templateUnderTest(t, TemplateHarmony)
	flat := []chat.Tool{{Name: "f", Parameters: flatSchema(4096)}}
	if n := ToolBytes(harmony, flat); n < len(flat[0].Parameters) {
		t.Errorf("a flat schema of %d bytes is charged %d", len(flat[0].Parameters), n)
	}
	deep := `{"type":"object","properties":{"a":` + strings.Repeat(`{"type":"object","properties":{"b":`, 60) +
		`{"type":"string"}` + strings.Repeat(`}}`, 60) + `}}`
	tools := []chat.Tool{{Name: "f", Parameters: deep}}
	body, _ := harmonyTools("", tools)
	if n := ToolBytes(harmony, tools); n < len(body) || len(body) < 2*len(deep) {
		t.Errorf("a %d-byte schema 60 levels deep renders %d bytes and is charged %d", len(deep), len(body), n)
	}
	for name, schema := range hostileSchemas(256 << 10) {
		tools := []chat.Tool{{Name: "f", Parameters: schema}}
		if charged, bound := ToolBytes(harmony, tools), 2*(harmonySchemaGrowth*len(schema)+templateJSONSlack); charged > bound {
			t.Errorf("%s: ToolBytes = %d, over the rendering bound %d", name, charged, bound)
		}
	}
}
