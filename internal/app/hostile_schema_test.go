package app

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/tokens"
)

// flatParams is an ordinary tool schema of about size bytes: one level of
// described string properties.
func flatParams(size int) string {
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

// hostileParams are tool schemas of about size bytes that made rendering
// super-linear (issue 24): properties nested many levels with siblings at
// each (gpt-oss indents and re-copied every level), and arrays nested in
// type and enum (re-joined at every level).
func hostileParams(size int) map[string]string {
	nested := func(depth int) string {
		per := size / depth / 40
		var b strings.Builder
		for d := range depth {
			b.WriteString(`{"type":"object","properties":{`)
			for i := range per {
				fmt.Fprintf(&b, `"s%d":{"type":"string","description":"a"},`, i)
			}
			fmt.Fprintf(&b, `"n%d":`, d)
		}
		b.WriteString(`{"type":"string"}` + strings.Repeat(`}}`, depth))
		return b.String()
	}
	arrays := func(key string) string {
		const depth = 2000
		return `{"type":"object","properties":{"x":{"type":"string","` + key + `":` +
			strings.Repeat(`[`+strings.Repeat(`"a",`, size/depth/4), depth) + `"z"` + strings.Repeat(`]`, depth) + `}}}`
	}
	return map[string]string{
		"properties 62 deep": nested(62),
		"properties 12 deep": nested(12),
		"arrays in type":     arrays("type"),
		"arrays in enum":     arrays("enum"),
	}
}

func toolDefs(params string) []*contextdv1.ToolDefinition {
	return []*contextdv1.ToolDefinition{{Name: "f", Description: "Do it.", ParametersJson: params}}
}

// TestHostileSchemaCost: counting a tool schema of any shape costs at most
// 3× (allocated bytes) what an ordinary schema of the same size costs, for
// gpt-oss (TypeScript) and gpt-4o (OpenAI's rule). Before the fix a schema
// of 273 KB nested 62 levels took 3.6 s (flat: 0.17 s).
func TestHostileSchemaCost(t *testing.T) {
	const size = 256 << 10
	flat := flatParams(size)
	client := contextdv1.NewContextServiceClient(startServer(t, map[string]string{}))
	ctx := t.Context()
	for _, model := range []string{"gpt-oss-20b", "gpt-4o"} {
		count := func(params string) func() error {
			return func() error {
				_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Model: model, Tools: toolDefs(params)})
				return err
			}
		}
		flatCost, err := allocated(t, count(flat))
		if err != nil {
			t.Fatal(err)
		}
		for name, params := range hostileParams(size) {
			cost, err := allocated(t, count(params))
			if err != nil {
				t.Fatalf("%s %s: %v", model, name, err)
			}
			ratio := float64(cost) / float64(flatCost) * float64(len(flat)) / float64(len(params))
			t.Logf("%s, %s (%d bytes): %.2f× a flat schema's allocation", model, name, len(params), ratio)
			if ratio > 3 {
				t.Errorf("%s, %s: counting costs %.1f× a flat schema of the same size; want at most 3×", model, name, ratio)
			}
		}
	}
}

// TestHostileSchema: a schema charged past CONTEXTD_MAX_COUNT_BYTES for
// what it renders to (gpt-oss indents each level) is ResourceExhausted on
// CountTokens, CreateSession and UpdateSession while a flat one of the same
// size is served, on both stores, and a session stored before is intact
// afterwards.
func TestHostileSchema(t *testing.T) {
	const size = 256 << 10
	// Charged for what it renders to: the limit sits between what a flat
	// schema and one nested 12 levels (indented 4 spaces a level) of the
	// same size are charged for gpt-oss.
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	oss, _ := models.Lookup("gpt-oss-20b")
	deep := hostileParams(size)["properties 12 deep"]
	charge := func(params string) int {
		return tokens.ToolBytes(tokens.FramingOf(oss), []chat.Tool{{Name: "f", Description: "Do it.", Parameters: params}})
	}
	flatCharge, deepCharge := charge(flatParams(len(deep))), charge(deep)
	t.Logf("charged for gpt-oss: a flat schema of %d bytes %d, one nested 12 deep %d", len(deep), flatCharge, deepCharge)
	if deepCharge < 2*flatCharge {
		t.Fatalf("a nested schema is charged %d, a flat one of the same size %d; want what it renders to", deepCharge, flatCharge)
	}
	limit := (flatCharge + deepCharge) / 2
	onBothStores(t, map[string]string{"CONTEXTD_MAX_COUNT_BYTES": fmt.Sprint(limit)}, func(t *testing.T, client contextdv1.ContextServiceClient) {
		ctx := t.Context()
		keep, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "keep", Model: "gpt-oss-20b", Tools: toolDefs(flatParams(2000))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "keep", Messages: []*contextdv1.Message{user("hello")}}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			call func(params string) error
		}{
			{"CountTokens", func(params string) error {
				_, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Model: "gpt-oss-20b", Tools: toolDefs(params)})
				return err
			}},
			{"CreateSession", func(params string) error {
				_, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Model: "gpt-oss-20b", Tools: toolDefs(params)})
				return err
			}},
			{"UpdateSession", func(params string) error {
				_, err := client.UpdateSession(ctx, &contextdv1.UpdateSessionRequest{SessionId: "keep", Tools: toolDefs(params),
					UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"tools"}}})
				return err
			}},
		} {
			if err := c.call(deep); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "CONTEXTD_MAX_COUNT_BYTES") {
				t.Errorf("%s with a schema nested 12 deep: %v; want ResourceExhausted naming CONTEXTD_MAX_COUNT_BYTES", c.name, err)
			}
			if c.name == "UpdateSession" {
				continue // would change the session checked below
			}
			if err := c.call(flatParams(len(deep))); err != nil {
				t.Errorf("%s with a flat schema of the same size: %v", c.name, err)
			}
		}
		got, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "keep"})
		if err != nil || got.GetSession().GetVersion() != keep.GetSession().GetVersion()+1 ||
			got.GetSession().GetTools()[0].GetParametersJson() != flatParams(2000) || got.GetSession().GetLogCount() != 1 {
			t.Errorf("the session after refused calls: %v, %v", got, err)
		}
		msgs, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "keep"})
		if err != nil || len(msgs.GetMessages()) != 1 || msgs.GetMessages()[0].GetParts()[0].GetText().GetText() != "hello" {
			t.Errorf("messages after refused calls: %v, %v", msgs, err)
		}
	})
}
