package app

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// rawCodec sends a request's bytes as they are, so a test builds a hostile
// body on the wire without decoding (or allocating) it in the client.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// messagesBody is the wire form of a request whose field holds msgs user
// messages of parts empty parts each (after a session id "s", field 1, for
// AppendMessagesRequest).
func messagesBody(field protowire.Number, msgs, parts int) []byte {
	var m []byte
	m = protowire.AppendTag(m, 3, protowire.VarintType) // role
	m = protowire.AppendVarint(m, uint64(contextdv1.Role_ROLE_USER))
	for range parts {
		m = protowire.AppendTag(m, 4, protowire.BytesType) // an empty Part
		m = protowire.AppendVarint(m, 0)
	}
	var b []byte
	if field == 2 {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, "s")
	}
	for range msgs {
		b = protowire.AppendTag(b, field, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b
}

// TestHostileMillionParts: a real gRPC client sends an append of one
// message with a million empty parts (2 MB on the wire, within
// CONTEXTD_MAX_MESSAGE_BYTES), then a CountTokens of 2,000 messages of
// 1,000 empty parts each (4 MB). Both are refused before protobuf decodes
// them, InvalidArgument naming the field: messages[0].parts (a message
// may have 1,000 parts), messages (a request 100,000), and the process
// (client included) allocates a small multiple of the body for it. The
// same append over Connect's binary protocol too. Before, decoding came
// first: over gRPC the refusal protovalidate wrote after decoding broke the
// connection (COMPRESSION_ERROR, 30–40 s a call), and over Connect one call
// allocated 10 GB, 5,054× the body, in 91 s.
func TestHostileMillionParts(t *testing.T) {
	conn := startServer(t, map[string]string{})
	client := contextdv1.NewContextServiceClient(conn)
	ctx := t.Context()
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		method     string
		body       []byte
		code       codes.Code
		names      string
		field      string
		maxPerByte float64
	}{
		{"a million parts", "AppendMessages", messagesBody(2, 1, 1_000_000), codes.InvalidArgument, "messages[0].parts", "messages[0].parts", 4},
		{"2,000 messages of 1,000 parts", "CountTokens", messagesBody(6, 2_000, 1_000), codes.InvalidArgument, "messages:", "messages", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc, err := allocated(t, func() error {
				var out []byte
				return conn.Invoke(ctx, "/contextd.v1.ContextService/"+tc.method, &tc.body, &out, grpc.ForceCodec(rawCodec{}))
			})
			st := status.Convert(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.names) {
				t.Fatalf("%d-byte body: %v; want %v naming %s", len(tc.body), err, tc.code, tc.names)
			}
			if tc.field != "" {
				checkViolation(t, st, tc.field)
			}
			ratio := float64(alloc) / float64(len(tc.body))
			t.Logf("%d-byte body: %d bytes allocated (%.1f× the body)", len(tc.body), alloc, ratio)
			if ratio > tc.maxPerByte {
				t.Errorf("refusing a %d-byte body allocated %d bytes, %.1f× the body; want at most %v×", len(tc.body), alloc, ratio, tc.maxPerByte)
			}
		})
	}
	t.Run("connect", func(t *testing.T) {
		body := messagesBody(2, 1, 1_000_000)
		alloc, err := allocated(t, func() error {
			resp, err := http.Post("http://"+conn.Target()+"/contextd.v1.ContextService/AppendMessages", "application/proto", bytes.NewReader(body))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte("messages[0].parts")) {
				return fmt.Errorf("Connect: HTTP %d %s; want 400 naming messages[0].parts", resp.StatusCode, b)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ratio := float64(alloc) / float64(len(body))
		t.Logf("Connect, %d-byte body: %d bytes allocated (%.1f× the body)", len(body), alloc, ratio)
		if ratio > 6 {
			t.Errorf("refusing a %d-byte body over Connect allocated %.1f× the body; want at most 6×", len(body), ratio)
		}
	})
}

// inlineBody is a GetContextUsageRequest whose inline context (field 2, a
// singular message) is sent in pieces pieces of msgs empty messages each:
// protobuf merges the pieces into one InlineContext of pieces × msgs
// messages.
func inlineBody(pieces, msgs int) []byte {
	var user []byte
	user = protowire.AppendTag(user, 3, protowire.VarintType) // role
	user = protowire.AppendVarint(user, uint64(contextdv1.Role_ROLE_USER))
	var m []byte
	for range msgs {
		m = protowire.AppendTag(m, 4, protowire.BytesType) // a user message with nothing in it
		m = protowire.AppendBytes(m, user)
	}
	var b []byte
	for range pieces {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b
}

// TestHostileMergedInline: a singular message field sent in pieces is one
// message to the decoder, so its lists are counted over all the pieces.
// Three pieces of 100,000 user messages (1.2 MB) are refused before
// decoding, naming inline.messages (a request may have 100,000); 65
// pieces of one message are refused naming inline. Before, the walk
// counted each piece alone and let the 300,000 messages be decoded: the
// refusal protovalidate wrote after decoding broke the connection
// (COMPRESSION_ERROR) after 12 s.
func TestHostileMergedInline(t *testing.T) {
	conn := startServer(t, map[string]string{})
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		body  []byte
		field string
	}{
		{"3 pieces of 100,000 messages", inlineBody(3, 100_000), "inline.messages"},
		{"65 pieces", inlineBody(65, 1), "inline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc, err := allocated(t, func() error {
				var out []byte
				return conn.Invoke(ctx, "/contextd.v1.ContextService/GetContextUsage", &tc.body, &out, grpc.ForceCodec(rawCodec{}))
			})
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "refused before decoding") {
				t.Fatalf("%d-byte body: %v; want InvalidArgument refused before decoding", len(tc.body), err)
			}
			checkViolation(t, st, tc.field)
			ratio := float64(alloc) / float64(len(tc.body))
			t.Logf("%d-byte body: %d bytes allocated (%.1f× the body)", len(tc.body), alloc, ratio)
			if len(tc.body) > 100_000 && ratio > 4 {
				t.Errorf("refusing a %d-byte body allocated %.1f× the body; want at most 4×", len(tc.body), ratio)
			}
		})
	}
}

// checkViolation checks that st carries one BadRequest violation, on field.
func checkViolation(t *testing.T, st *status.Status, field string) {
	t.Helper()
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 && br.GetFieldViolations()[0].GetField() == field {
			return
		}
	}
	t.Errorf("no BadRequest violation on %s: %v", field, st.Details())
}
