package tokens

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestHarmonySchemaDepthIsBounded: a parameters schema nested deeper than
// maxSchemaDepth (a review's 9,000 levels took minutes: each level of the
// TypeScript copies and indents what is below it) is declared as taking no
// parameters, as a schema that is not JSON is; one within the bound is
// written out.
func TestHarmonySchemaDepthIsBounded(t *testing.T) {
	enc, fr := templateUnderTest(t, TemplateHarmony)
	count := func(params string) int64 {
		return CountRequest(enc, fr, "", []chat.Tool{{Name: "f", Parameters: params}}, nil).Tools
	}
	nested := func(d int) string {
		return `{"type":"object","properties":{"a":` + strings.Repeat(`{"type":"object","properties":{"b":`, d) +
			`{"type":"string"}` + strings.Repeat(`}}`, d) + `}}`
	}
	none := count("")
	if n := count(nested(10)); n <= none {
		t.Errorf("a schema 10 levels deep counts %d, no more than none (%d)", n, none)
	}
	for _, d := range []int{maxSchemaDepth, 9_000, 200_000} {
		if n := count(nested(d)); n != none {
			t.Errorf("a schema %d levels deep counts %d, want %d (no parameters)", d, n, none)
		}
	}
}
