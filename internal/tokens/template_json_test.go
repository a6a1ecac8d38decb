package tokens

import (
	"bufio"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// pythonDumps is the reference for templateJSON: what a Python server's
// template prints for JSON text it parsed, json.dumps(json.loads(text),
// ensure_ascii=False) (transformers' tojson), and with indent=4 (Llama
// 3.1's tojson(indent=4)), from python3 (in CI: Debian's, which .ci/run
// installs; CONTEXTD_REQUIRE_PYTHON=1 makes its absence a failure).
const pythonDumps = `
import json, sys
for line in sys.stdin:
    v = json.loads(json.loads(line))
    print(json.dumps([json.dumps(v, ensure_ascii=False), json.dumps(v, ensure_ascii=False, indent=4)]))
`

func pythonReference(t *testing.T, texts []string) [][2]string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CONTEXTD_REQUIRE_PYTHON") == "1" {
			t.Fatalf("CONTEXTD_REQUIRE_PYTHON=1: %v", err)
		}
		t.Skipf("no python3: %v", err)
	}
	var in strings.Builder
	for _, s := range texts {
		line, _ := json.Marshal(s)
		in.Write(line)
		in.WriteByte('\n')
	}
	cmd := exec.CommandContext(t.Context(), py, "-c", pythonDumps)
	cmd.Stdin = strings.NewReader(in.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var ref [][2]string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var pair [2]string
		if err := json.Unmarshal(sc.Bytes(), &pair); err != nil {
			t.Fatal(err)
		}
		ref = append(ref, pair)
	}
	if len(ref) != len(texts) {
		t.Fatalf("python3 answered %d of %d lines", len(ref), len(texts))
	}
	return ref
}

// TestTemplateJSONIsPythons: tool-call arguments and tool declarations are
// printed as a Python server's template prints them after parsing: numbers
// as Python's int and float (1.0 stays 1.0, 1e-05, 1e+16, big integers
// exact, Infinity), strings escaped as json.dumps(ensure_ascii=False) does,
// compact and indented layouts. Checked against python3 on hand-picked edge
// cases and 3,000 random numbers of every magnitude and spelling.
func TestTemplateJSONIsPythons(t *testing.T) {
	texts := []string{
		`{"a": 1.0, "b": 1e3, "c": 1E400, "d": -1e400, "e": 1e-400, "f": -0, "g": -0.0, "h": 0.0}`,
		`[1e16, 1e15, 9999999999999998.0, 12345678901234567.0, 1234567890123456.0, 0.0001, 0.00001, 1.5e-7]`,
		`[123456789012345678901234567890, -98765432109876543210, 5e-324, 1.7976931348623157e308, 0.1, 0.30000000000000004]`,
		`{"nested": {"list": [[], {}, [1, [2.50, {"x": null}]], true, false], "empty": {}}, "s": "é \" \\ \n\t\u0001 \u007f \u2028 😀"}`,
		`{"dup": 1, "other": 2.0}`, `"just a string"`, `3.14`, `[]`, `{}`, `-1E-5`, `2e0`, `100e-2`,
	}
	rng := rand.New(rand.NewPCG(15, 15))
	for picked := len(texts); len(texts) < picked+3000; {
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		var s string
		switch rng.IntN(6) {
		case 0:
			s = strconv.FormatFloat(f, 'g', -1, 64)
		case 1:
			s = strconv.FormatFloat(f, 'e', rng.IntN(20), 64)
		case 2: // a human-sized number with a fraction
			s = strconv.Itoa(rng.IntN(1e7)) + "." + strconv.Itoa(rng.IntN(1000))
		case 3: // an integral float
			s = strconv.Itoa(rng.IntN(1e12)>>rng.IntN(40)) + ".0"
		case 4: // an integer beyond float precision
			s = "-" + strconv.FormatUint(rng.Uint64(), 10) + strconv.FormatUint(rng.Uint64()>>rng.IntN(64), 10)
		default:
			s = strconv.FormatFloat(f*math.Pow(10, float64(-rng.IntN(30))), 'g', rng.IntN(17)+1, 64)
		}
		if !json.Valid([]byte(s)) {
			s = strconv.FormatFloat(f, 'g', -1, 64)
		}
		texts = append(texts, s)
	}
	ref := pythonReference(t, texts)
	bad := 0
	for i, s := range texts {
		if got := templateJSON(s); got != ref[i][0] {
			if bad++; bad <= 20 {
				t.Errorf("templateJSON(%s) = %s, python %s", s, got, ref[i][0])
			}
		}
		if got := templateJSONIndent(s, 4); got != ref[i][1] {
			if bad++; bad <= 20 {
				t.Errorf("templateJSONIndent(%s) = %s, python %s", s, got, ref[i][1])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d differ", bad, 2*len(texts))
	}
}

// TestTemplateJSONIsBounded: tool-call arguments or tool parameters nested
// millions deep (a request within the count limit) neither overflow the
// stack nor render more than the stated multiple of their input: the text
// is counted as given. (Before, 8 MB of nested arrays killed the process,
// and a 6 KB schema rendered with Llama 3.1's indentation into 290,000
// tokens.)
func TestTemplateJSONIsBounded(t *testing.T) {
	for _, depth := range []int{maxTemplateJSONDepth + 1, 100_000, 2_000_000} {
		text := `{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
		if got := templateJSON(text); got != text {
			t.Errorf("depth %d: re-serialized (%d bytes), want the text as given", depth, len(got))
		}
		if got := templateJSONIndent(text, 4); got != text {
			t.Errorf("depth %d, indented: re-serialized (%d bytes), want the text as given", depth, len(got))
		}
	}
	// Within the depth bound, indentation may not outgrow the input past
	// its limit.
	deep := `{"a":` + strings.Repeat("[1,", maxTemplateJSONDepth-2) + "1" + strings.Repeat("]", maxTemplateJSONDepth-2) + `}`
	if got := templateJSONIndent(deep, 4); len(got) > 16*len(deep)+templateJSONSlack {
		t.Errorf("indented rendering of %d bytes is %d bytes", len(deep), len(got))
	}
	// What stays inside the bounds is still rendered as Python does.
	nested := `{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`
	if got, want := templateJSON(nested), `{"a": `+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`; got != want {
		t.Errorf("100 levels: %q", got)
	}
}
