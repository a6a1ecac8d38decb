package api

import (
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/sqlite"
	"github.com/contextd/contextd/internal/tokens"
)

// TestReservedMetadata: the metadata keys contextd sets on messages it
// makes and reads back as its own are refused from an API client. Over a
// real gRPC listener, a client that sets one on AppendMessages,
// PrepareContext, CountTokens or GetContextUsage is InvalidArgument naming
// the key, and the session is unchanged. The gateway's marks of what a
// provider's compaction dropped (a message counted 0 tokens) and where it
// stopped reading: otherwise a client could make its whole session count 0
// tokens, never be compacted and pass CONTEXTD_MAX_VIEW_WINDOWS.
// Compaction's marks of a stand-in (contextd_scaffold_of,
// contextd_scaffold_notes): kept by the placeholder of the client's
// message, they made it pass as the stand-in of the original task
// (accepted before). The mark of a client's version of a log message
// (contextd.edit_of), which the engine reads as standing for that message;
// a message's place in a client's history (contextd.history), indexed at
// append, which would plant a chain the gateway matches conversations
// into; the mark of a result contextd recorded for an interrupted call
// (contextd.interrupted) (all three accepted before). And the gateway's
// own keys (contextd.gateway.*): its copy of the provider's JSON of a
// message, contextd.gateway.raw, goes upstream in the message's place,
// counted as its parts (accepted before: a message of one word could go
// upstream as megabytes, uncounted).
func TestReservedMetadata(t *testing.T) {
	ctx := t.Context()
	db, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	models, err := tokens.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(tokens.NewEncodings(), models, db)
	client := contextdv1.NewContextServiceClient(serve(t, eng))
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	msg := func(key string) *contextdv1.Message {
		return &contextdv1.Message{Role: contextdv1.Role_ROLE_USER, Metadata: map[string]string{"ok": "1", key: "1"},
			Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: "a long enough message to count"}}}}}
	}
	field := func(err error) (codes.Code, string) {
		st, _ := status.FromError(err)
		for _, d := range st.Details() {
			if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
				return st.Code(), br.GetFieldViolations()[0].GetField()
			}
		}
		return st.Code(), ""
	}
	for _, key := range []string{chat.MetaProviderDropped, chat.MetaProviderCompaction, compaction.ScaffoldOfKey, compaction.ScaffoldNotesKey,
		engine.EditOfMetadata, store.HistoryMetadata, engine.InterruptedMetadata, "contextd.gateway.raw", "contextd.gateway.digest"} {
		_, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "s", Messages: []*contextdv1.Message{msg("x"), msg(key)}})
		if code, f := field(err); code != codes.InvalidArgument || f != "messages[1].metadata["+key+"]" {
			t.Errorf("AppendMessages with %s: %v (field %q); want InvalidArgument naming it", key, err, f)
		}
		_, err = client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "s", Messages: []*contextdv1.Message{msg(key)}})
		if code, _ := field(err); code != codes.InvalidArgument {
			t.Errorf("PrepareContext with %s: %v; want InvalidArgument", key, err)
		}
		_, err = client.CountTokens(ctx, &contextdv1.CountTokensRequest{Model: "gpt-4o", Messages: []*contextdv1.Message{msg("x"), msg(key)}})
		if code, _ := field(err); code != codes.InvalidArgument {
			t.Errorf("CountTokens with %s: %v; want InvalidArgument", key, err)
		}
		_, err = client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_Inline{
			Inline: &contextdv1.InlineContext{Model: "gpt-4o", Messages: []*contextdv1.Message{msg("x"), msg(key)}}}})
		if code, f := field(err); code != codes.InvalidArgument || f != "inline.messages[1].metadata["+key+"]" {
			t.Errorf("GetContextUsage with %s: %v (field %q); want InvalidArgument naming it", key, err, f)
		}
	}
	s, err := eng.GetSession(ctx, auth.DefaultTenant, "s")
	if err != nil || s.Usage.MessageCount != 0 {
		t.Errorf("session after refused appends: %+v, %v; want no message", s, err)
	}
	if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "s", Messages: []*contextdv1.Message{msg("contextd.other")}}); err != nil {
		t.Errorf("another contextd key: %v", err)
	}
}
