package app

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// jsonMessages is the JSON of a request whose messages are msgs user
// messages of parts empty parts each (after "sessionId": "s" when
// session), written as curl would send it.
func jsonMessages(session bool, msgs, parts int) []byte {
	var b bytes.Buffer
	b.WriteString("{")
	if session {
		b.WriteString(`"sessionId": "s", `)
	}
	b.WriteString(`"messages": [`)
	for i := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role": "ROLE_USER", "parts": [`)
		for j := range parts {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString("{}")
		}
		b.WriteString("]}")
	}
	b.WriteString("]}")
	return b.Bytes()
}

// TestHostileJSONParts: the requests of TestHostileMillionParts sent as
// JSON (Connect's application/json, as curl sends it, and gRPC-Web's
// +json) are refused before protojson decodes them, with the same
// InvalidArgument naming the same field, for a small multiple of the body.
// Before, vanguard's JSON codec decoded the million parts first (and the
// wire walk refused the protobuf vanguard made of them): about 60× the
// body allocated.
func TestHostileJSONParts(t *testing.T) {
	conn := startServer(t, map[string]string{})
	base := "http://" + conn.Target() + "/contextd.v1.ContextService/"
	api := connectAPI{t: t, base: "http://" + conn.Target(), client: http.DefaultClient}
	if code, _, out := api.post("CreateSession", `{"id": "s", "model": "gpt-4o"}`); code != http.StatusOK {
		t.Fatalf("CreateSession: HTTP %d %s", code, out)
	}
	for _, tc := range []struct {
		name, method string
		body         []byte
		field        string
	}{
		{"a million parts", "AppendMessages", jsonMessages(true, 1, 1_000_000), "messages[0].parts"},
		{"200 messages of 600 parts", "CountTokens", jsonMessages(false, 200, 600), "messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc, err := allocated(t, func() error {
				resp, err := http.Post(base+tc.method, "application/json", bytes.NewReader(tc.body))
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				out, _ := io.ReadAll(resp.Body)
				var ce connectError
				if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(out, &ce) != nil || ce.Code != "invalid_argument" ||
					!strings.Contains(ce.Message, "refused before decoding") {
					return fmt.Errorf("HTTP %d %.300s; want 400 invalid_argument refused before decoding", resp.StatusCode, out)
				}
				if f := ce.fields(t); !slices.Equal(f, []string{tc.field}) {
					return fmt.Errorf("violations on %v; want one on %s", f, tc.field)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			ratio := float64(alloc) / float64(len(tc.body))
			t.Logf("%d-byte JSON body: %d bytes allocated (%.1f× the body)", len(tc.body), alloc, ratio)
			if ratio > 6 {
				t.Errorf("refusing a %d-byte JSON body allocated %.1f× the body; want at most 6×", len(tc.body), ratio)
			}
		})
	}
	t.Run("grpc-web json", func(t *testing.T) {
		msg := jsonMessages(true, 1, 1_000_000)
		body := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
		body = append(body, msg...)
		alloc, err := allocated(t, func() error {
			resp, err := http.Post(base+"AppendMessages", "application/grpc-web+json", bytes.NewReader(body))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			status := resp.Header.Get("Grpc-Status") + " " + resp.Header.Get("Grpc-Message")
			if !bytes.Contains(out, []byte("grpc-status:3")) && !strings.HasPrefix(status, "3 ") {
				return fmt.Errorf("gRPC-Web: status %q, body %.300q; want InvalidArgument", status, out)
			}
			if !bytes.Contains(out, []byte("messages[0].parts")) && !strings.Contains(status, "messages[0].parts") {
				return fmt.Errorf("gRPC-Web: status %q, body %.300q; want it to name messages[0].parts", status, out)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ratio := float64(alloc) / float64(len(body))
		t.Logf("gRPC-Web, %d-byte JSON body: %d bytes allocated (%.1f× the body)", len(body), alloc, ratio)
		if ratio > 6 {
			t.Errorf("refusing a %d-byte JSON body over gRPC-Web allocated %.1f× the body; want at most 6×", len(body), ratio)
		}
	})
}

// TestJSONScanAdmits: the scan passes what it does not refuse — requests
// within the caps, with every kind of value, escaped keys, maps, unknown
// fields — and counts a list named by its proto name or an escaped key,
// and a map's pairs.
func TestJSONScanAdmits(t *testing.T) {
	conn := startServer(t, map[string]string{})
	api := connectAPI{t: t, base: "http://" + conn.Target(), client: http.DefaultClient}
	if code, _, out := api.post("CreateSession", `{"id": "s", "model": "gpt-4o", "labels": {"a": "b", "c\u0064": "e"}}`); code != http.StatusOK {
		t.Fatalf("CreateSession: HTTP %d %s", code, out)
	}
	body := `{"session_id": "s", "messages": [{"role": "ROLE_USER", "parts": [{"text": {"text": "a \"quoted\" [x] {y}"}}, {"text": {"text": "b", "unknown": [1, {"x": null}]}}]}]}`
	if code, _, out := api.post("AppendMessages", body); code != http.StatusOK {
		t.Fatalf("AppendMessages: HTTP %d %s", code, out)
	}
	over := string(jsonMessages(true, 1, 1_001))
	over = strings.Replace(over, `"sessionId"`, `"session_id"`, 1)
	over = strings.Replace(over, `"parts"`, `"p\u0061rts"`, 1)
	code, _, out := api.post("AppendMessages", over)
	if code != http.StatusBadRequest || !bytes.Contains(out, []byte("messages[0].parts: has more than 1000 items")) {
		t.Fatalf("1,001 parts under an escaped key: HTTP %d %s; want 400 naming messages[0].parts", code, out)
	}
	var labels strings.Builder
	for i := range 65 {
		fmt.Fprintf(&labels, `, "k%d": "v"`, i)
	}
	code, _, out = api.post("CreateSession", `{"id": "t", "model": "gpt-4o", "labels": {`+labels.String()[2:]+`}}`)
	if code != http.StatusBadRequest || !bytes.Contains(out, []byte("labels: has more than 64 items; at most 64 are allowed; refused before decoding")) {
		t.Fatalf("65 labels: HTTP %d %s; want 400 naming labels", code, out)
	}
}

// TestHostileFieldMask: an UpdateSession whose update_mask holds 1.5
// million paths — in JSON one string "a,a,…" (3 MB), its commas escaped
// or not, and in protobuf as many paths fields — is refused before it is
// decoded, naming update_mask.paths, for a small multiple of the body; a
// mask of the fields UpdateSession changes still passes. Before, the mask
// was decoded whole: 1.5 million strings, 412 MB allocated for the 3 MB
// JSON body (137× it), before the handler refused its first path.
func TestHostileFieldMask(t *testing.T) {
	conn := startServer(t, map[string]string{})
	api := connectAPI{t: t, base: "http://" + conn.Target(), client: http.DefaultClient}
	if code, _, out := api.post("CreateSession", `{"id": "s", "model": "gpt-4o"}`); code != http.StatusOK {
		t.Fatalf("CreateSession: HTTP %d %s", code, out)
	}
	if code, _, out := api.post("UpdateSession", `{"sessionId": "s", "updateMask": "labels,systemPrompt", "labels": {"a": "b"}}`); code != http.StatusOK {
		t.Fatalf("UpdateSession with an ordinary mask: HTTP %d %s", code, out)
	}
	const paths = 1_500_000
	wire, err := proto.Marshal(&contextdv1.UpdateSessionRequest{SessionId: "s",
		UpdateMask: &fieldmaskpb.FieldMask{Paths: slices.Repeat([]string{"a"}, paths)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, contentType string
		body              []byte
	}{
		{"json", "application/json", []byte(`{"sessionId": "s", "updateMask": "` + strings.Repeat("a,", paths-1) + `a"}`)},
		{"json, commas escaped", "application/json", []byte(`{"sessionId": "s", "updateMask": "` + strings.Repeat(`a\u002c`, paths/4) + `a"}`)},
		{"protobuf", "application/proto", wire},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc, err := allocated(t, func() error {
				resp, err := http.Post("http://"+conn.Target()+"/contextd.v1.ContextService/UpdateSession", tc.contentType, bytes.NewReader(tc.body))
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				out, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(out, []byte("update_mask.paths: has more than 64 items")) ||
					!bytes.Contains(out, []byte("refused before decoding")) {
					return fmt.Errorf("HTTP %d %.300q; want 400 naming update_mask.paths, refused before decoding", resp.StatusCode, out)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			ratio := float64(alloc) / float64(len(tc.body))
			t.Logf("%d-byte body: %d bytes allocated (%.1f× the body)", len(tc.body), alloc, ratio)
			if ratio > 6 {
				t.Errorf("refusing a %d-byte body allocated %.1f× the body; want at most 6×", len(tc.body), ratio)
			}
		})
	}
}
