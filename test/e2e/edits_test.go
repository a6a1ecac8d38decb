package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestSessionEditsOverGRPC: UpdateSession and ClearMessages over a real
// listener: a watcher sees STATUS_EVENT_UPDATED and STATUS_EVENT_COMPACTED
// at the new versions, a mask naming no field is InvalidArgument naming the
// path, and grpcurl describe shows both RPCs with their comments.
func TestSessionEditsOverGRPC(t *testing.T) {
	dir := t.TempDir()
	srv := startProc(t, build(t, dir, "contextd", "./cmd/server"), "CONTEXTD_DATA_DIR="+filepath.Join(dir, "data"))
	client := contextdv1.NewContextServiceClient(srv.conn)
	ctx := t.Context()
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "ed", Model: "gpt-4o", SystemPrompt: "Be brief."}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "ed",
		Messages: []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{text("Fix the build.")}}}}); err != nil {
		t.Fatal(err)
	}
	stream, err := client.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{SessionId: "ed"})
	if err != nil {
		t.Fatal(err)
	}
	await(t, watchUntil(stream, func(*contextdv1.ContextStatus) bool { return true }), 10*time.Second, "snapshot")

	up, err := client.UpdateSession(ctx, &contextdv1.UpdateSessionRequest{SessionId: "ed",
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"system_prompt"}}, SystemPrompt: strings.Repeat("Be careful. ", 30)})
	if err != nil {
		t.Fatal(err)
	}
	if up.GetSession().GetUsage().GetSystemTokens() <= 3 {
		t.Errorf("system prompt not recounted: %v", up.GetSession().GetUsage())
	}
	v := up.GetSession().GetVersion()
	await(t, watchUntil(stream, func(s *contextdv1.ContextStatus) bool {
		return s.GetVersion() == v && s.GetEvent() == contextdv1.StatusEvent_STATUS_EVENT_UPDATED
	}), 10*time.Second, "STATUS_EVENT_UPDATED")

	_, err = client.UpdateSession(ctx, &contextdv1.UpdateSessionRequest{SessionId: "ed",
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"id"}}})
	st, _ := status.FromError(err)
	var field string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			field = br.GetFieldViolations()[0].GetField()
		}
	}
	if st.Code() != codes.InvalidArgument || field != "update_mask.paths[0]" {
		t.Errorf("bad mask: %v (field %q)", err, field)
	}

	cl, err := client.ClearMessages(ctx, &contextdv1.ClearMessagesRequest{SessionId: "ed", ExpectedVersion: &v})
	if err != nil {
		t.Fatal(err)
	}
	if cl.GetSession().GetMessageCount() != 0 || cl.GetCompaction().GetTiers()[0] != "clear" {
		t.Errorf("clear: %v", cl)
	}
	cv := cl.GetSession().GetVersion()
	await(t, watchUntil(stream, func(s *contextdv1.ContextStatus) bool {
		return s.GetVersion() == cv && s.GetEvent() == contextdv1.StatusEvent_STATUS_EVENT_COMPACTED
	}), 10*time.Second, "STATUS_EVENT_COMPACTED")

	g := grpcurl{t: t, bin: build(t, dir, "grpcurl", "github.com/fullstorydev/grpcurl/cmd/grpcurl"), addr: srv.addr}
	out := string(g.call("", "describe", "contextd.v1.ContextService"))
	if !strings.Contains(out, "rpc UpdateSession") || !strings.Contains(out, "Changes a session mid-conversation") ||
		!strings.Contains(out, "rpc ClearMessages") || !strings.Contains(out, "Starts the active view afresh") {
		t.Errorf("describe lacks the edits:\n%s", out)
	}
}
