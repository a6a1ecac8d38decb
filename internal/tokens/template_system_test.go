package tokens

import (
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestLeadingSystemWithoutText: a leading system message that holds only an
// image is a system prompt with no text, as the templates read it
// (messages[0]['role'] == 'system'; its text parts joined are ""): the
// request counts as with an empty leading system message (which the golden
// set checks against the templates) plus the image, which the message's own
// count carries. Text and an image count the text's request plus the image.
// The golden set cannot hold images, so this ties them to it.
func TestLeadingSystemWithoutText(t *testing.T) {
	img := chat.Part{Type: chat.PartImage, Image: &chat.Image{Width: 512, Height: 512}}
	text := func(s string) chat.Part { return chat.Part{Type: chat.PartText, Text: s} }
	user := chat.Message{Role: chat.RoleUser, Parts: []chat.Part{text("Hello there.")}}
	tools := []chat.Tool{{Name: "roll", Description: "Roll a die.", Parameters: `{"type": "object", "properties": {"sides": {"type": "integer"}}}`}}
	for name, tmpl := range chatTemplates {
		t.Run(name, func(t *testing.T) {
			enc, fr := templateUnderTest(t, name)
			for _, tc := range []struct {
				name        string
				with, like  []chat.Part // the leading system message, and the one it counts like
				wantSysPart []PartCount // the leading message's own breakdown
			}{
				{"image only", []chat.Part{img}, []chat.Part{text("")}, []PartCount{{chat.PartImage, ImageTokens(img.Image)}}},
				{"image and text", []chat.Part{img, text("Be brief.")}, []chat.Part{text("Be brief.")},
					[]PartCount{{chat.PartImage, ImageTokens(img.Image)}, {chat.PartText, 0}}},
				{"text and image", []chat.Part{text("Be brief."), img}, []chat.Part{text("Be brief.")},
					[]PartCount{{chat.PartText, 0}, {chat.PartImage, ImageTokens(img.Image)}}},
			} {
				imgTokens := ImageTokens(img.Image)
				if _, ok := tmpl.(systemReader); ok {
					// Gemma 3 reads only the first part's text: an image
					// is not rendered, and an image first leaves no text.
					imgTokens = 0
					if tc.with[0].Type == chat.PartImage {
						tc.like = []chat.Part{text("")}
					}
					tc.wantSysPart = append([]PartCount(nil), tc.wantSysPart...)
					for i := range tc.wantSysPart {
						tc.wantSysPart[i].Tokens = 0
					}
				}
				for _, tools := range [][]chat.Tool{nil, tools} {
					got := CountRequest(enc, fr, "", tools, []chat.Message{{Role: chat.RoleSystem, Parts: tc.with}, user})
					want := CountRequest(enc, fr, "", tools, []chat.Message{{Role: chat.RoleSystem, Parts: tc.like}, user})
					if got.System != want.System || got.Tools != want.Tools || got.Messages != want.Messages+imgTokens {
						t.Errorf("%s, %d tools: system/tools/messages %d/%d/%d, want %d/%d/%d", tc.name, len(tools),
							got.System, got.Tools, got.Messages, want.System, want.Tools, want.Messages+imgTokens)
					}
					lead := got.PerMsg[0]
					if lead.Tokens != imgTokens || lead.Framing != 0 || len(lead.Parts) != len(tc.wantSysPart) {
						t.Fatalf("%s: leading message %+v", tc.name, lead)
					}
					for i, p := range tc.wantSysPart {
						if lead.Parts[i] != p {
							t.Errorf("%s: leading message part %d %+v, want %+v", tc.name, i, lead.Parts[i], p)
						}
					}
					var sum int64
					for _, mc := range got.PerMsg {
						sum += mc.Tokens
					}
					if sum+int64(fr.ReplyPriming) != got.Messages {
						t.Errorf("%s: messages %d, but they sum to %d plus priming %d", tc.name, got.Messages, sum, fr.ReplyPriming)
					}
				}
			}
		})
	}
}
