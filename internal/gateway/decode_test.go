package gateway

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

func mustScan(t testing.TB, body string) *requestBody {
	t.Helper()
	b, err := scanBody([]byte(body))
	if err != nil {
		t.Fatalf("scanBody(%.60q): %v", body, err)
	}
	return b
}

// TestScanBodyAgreesWithEncodingJSON: the one-pass check accepts exactly
// the objects encoding/json accepts, and splits them into the members and
// elements it would decode.
func TestScanBodyAgreesWithEncodingJSON(t *testing.T) {
	cases := []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":-0.5e+10,"b":[1,2,{"c":null}],"d":"x\"\\\/\b\f\n\r\t\u00e9"}`,
		`{"messages":[],"model":"m"}`, `{"messages":[ {"role":"user","content":"hi"} , 3 ]}`,
		`{"a":1,"a":[2]}`, `{"a":[1],"a":2}`, `{"\u0061b":true,"c":false}`, "{\"a\":\"\xff\xfe\"}",
		// Not JSON objects, or not JSON.
		``, `[]`, `null`, `"x"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":[1,]}`, `{"a":01}`, `{"a":1.}`,
		`{"a":1e}`, `{"a":-}`, `{"a":tru}`, `{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}", `{"a":1} x`,
		`{"a":1}{}`, `{a:1}`, `{"a":[1 2]}`, `{"a":{"b":1 "c":2}}`, `{"a":.5}`, `{"a":+1}`, `{"a":"x}`,
		`{"a":[` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `]}`,
	}
	for _, in := range cases {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal([]byte(in), &want) != nil || want == nil
		got, err := scanBody([]byte(in))
		if (err != nil) != wantErr {
			t.Errorf("%.60q: scanBody error %v, encoding/json error %v", in, err, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if len(got.fields) != len(want) {
			t.Errorf("%.60q: %d members, want %d", in, len(got.fields), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(bytes.TrimSpace(got.fields[k]), bytes.TrimSpace(v)) {
				t.Errorf("%.60q: member %q is %s, want %s", in, k, got.fields[k], v)
			}
			var wantElems []json.RawMessage
			if json.Unmarshal(v, &wantElems) == nil && wantElems != nil {
				elems, ok := got.array(k)
				if !ok || len(elems) != len(wantElems) {
					t.Errorf("%.60q: %q splits into %d elements, want %d", in, k, len(elems), len(wantElems))
					continue
				}
				for i := range elems {
					if !bytes.Equal(elems[i], bytes.TrimSpace(wantElems[i])) {
						t.Errorf("%.60q: %q[%d] is %s, want %s", in, k, i, elems[i], wantElems[i])
					}
				}
			}
		}
		var back map[string]json.RawMessage
		if err := json.Unmarshal(got.encode(), &back); err != nil || len(back) != len(want) {
			t.Errorf("%.60q: encode wrote %s", in, got.encode())
		}
	}
}

// TestScanBodySplitsOnlyTheConversation: the scan keeps the elements of
// the conversation's member (messages, input) and of no other array: a
// request's tools (hundreds of schemas for some agents) are checked, not
// collected, as no door reads them one by one. Collecting every array's
// elements made the tools' and include's splits here.
func TestScanBodySplitsOnlyTheConversation(t *testing.T) {
	b := mustScan(t, `{"model":"m","tools":[{"name":"a"},{"name":"b"}],"include":["x"],"messages":[{"a":1}],"input":[{"b":2},{"c":3}]}`)
	split := map[string]int{}
	for k, a := range b.arrays {
		split[k] = len(a.elems)
	}
	if want := map[string]int{"messages": 1, "input": 2}; !maps.Equal(split, want) {
		t.Errorf("the scan split %v; want only the conversation's %v", split, want)
	}
	if tools, ok := b.array("tools"); !ok || len(tools) != 2 {
		t.Errorf("tools split on demand into %d elements (%v); want 2", len(tools), ok)
	}
}

// TestScanBodyNamesTheField: a body that stops being JSON is refused
// naming the member and element where it does.
func TestScanBodyNamesTheField(t *testing.T) {
	for in, want := range map[string]string{
		`{"model": "gpt-4o", "messages": [`:                             "messages[0]: unexpected end of JSON",
		`{"model": "gpt-4o", "messages": [{"role":"user"}, {"role":}]}`: "messages[1]: expected a value at byte",
		`{"model": "gpt-4o", "stream": tru}`:                            "stream: expected a value at byte",
		`{"model": "gpt-4o" "messages": []}`:                            "model: expected ',' or '}'",
	} {
		_, err := scanBody([]byte(in))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
}

// TestEncodeSplices: the spliced member is written from its pieces, the
// others as sent, in the client's order, members the gateway added last.
func TestEncodeSplices(t *testing.T) {
	b := mustScan(t, `{"model":"m", "messages":[{"a":1},{"b":2}], "stream":true}`)
	elems, _ := b.array("messages")
	b.splice("messages", append([]json.RawMessage{json.RawMessage(`{"s":0}`)}, elems[1]))
	b.fields["tools"] = json.RawMessage(`[]`)
	delete(b.fields, "stream")
	if got, want := string(b.encode()), `{"model":"m","messages":[{"s":0},{"b":2}],"tools":[]}`; got != want {
		t.Errorf("encode wrote %s, want %s", got, want)
	}
}

func FuzzScanBody(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"c"}]}`, `{"a":"\u00e9"}`, `{"a":-1.5e3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(in, &want) != nil || want == nil
		_, err := scanBody(in)
		if (err != nil) != wantErr {
			t.Fatalf("%q: scanBody error %v, encoding/json error %v", in, err, wantErr)
		}
	})
}
