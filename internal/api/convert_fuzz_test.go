package api

import (
	"testing"

	"google.golang.org/protobuf/proto"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/chat"
)

// FuzzMessageConversion feeds arbitrary bytes as a request: whatever decodes
// converts to domain messages (or a field error) and back without panicking,
// and what converts validates without panicking.
func FuzzMessageConversion(f *testing.F) {
	seed := &contextdv1.AppendMessagesRequest{SessionId: "s", Messages: []*contextdv1.Message{
		{Role: contextdv1.Role_ROLE_USER, Name: "n", Pinned: true, Metadata: map[string]string{"k": "v"},
			Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: "hi"}}}}},
		{Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolCall{
			ToolCall: &contextdv1.ToolCallPart{Id: "c1", Name: "bash", ArgumentsJson: `{"x":1}`}}}}},
		{Role: contextdv1.Role_ROLE_TOOL, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolResult{
			ToolResult: &contextdv1.ToolResultPart{ToolCallId: "c1", Content: "out", IsError: true}}}}},
		{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_Image{
			Image: &contextdv1.ImagePart{MediaType: "image/png", Width: 10, Height: 20, Detail: "low"}}}}},
		{Role: contextdv1.Role(99), Parts: []*contextdv1.Part{{}, {Kind: &contextdv1.Part_ToolCall{}}}},
	}}
	b, _ := proto.Marshal(seed)
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{0x12, 0x02, 0x22, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req contextdv1.AppendMessagesRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		msgs, err := messagesFromProto("messages", req.GetMessages())
		if err != nil {
			return
		}
		_ = chat.ValidateMessages("messages", msgs)
		for i := range msgs {
			back := messageToProto(&msgs[i])
			if len(back.GetParts()) != len(msgs[i].Parts) {
				t.Fatalf("round trip lost parts: %d → %d", len(msgs[i].Parts), len(back.GetParts()))
			}
		}
		_ = toolsFromProto(nil)
	})
}
