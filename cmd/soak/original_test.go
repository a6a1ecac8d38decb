package main

import (
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestOriginalOfASummary: a summary a revert restores or an expand
// returns (position 0: the log holds only what was appended) is compared
// with the copy a view showed, not with a log that never holds it (the
// 30-minute soak counted three such as invalid); an appended message
// missing from the log is still a problem.
func TestOriginalOfASummary(t *testing.T) {
	sum := &contextdv1.Message{Id: "sum_1_1", Kind: contextdv1.MessageKind_MESSAGE_KIND_SUMMARY, Role: contextdv1.Role_ROLE_USER,
		Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: "summary"}}}}}
	msg := textMessage(contextdv1.Role_ROLE_USER, "«a1.s0.t0.u» hello")
	msg.Id, msg.Position = "msg_1", 1
	sess := &apiSession{id: "s"}
	byID := map[string]*contextdv1.Message{}
	if _, ok := sess.original(byID, sum); ok {
		t.Error("a summary no view showed has an original")
	}
	sess.show([]*contextdv1.Message{sum, msg})
	if o, ok := sess.original(byID, sum); !ok || o == nil || !sameContent(o, sum) {
		t.Errorf("a summary a view showed: %v %v", o, ok)
	}
	if o, ok := sess.original(byID, msg); !ok || o != nil {
		t.Errorf("an appended message missing from the log: %v %v, want nil, true (a problem)", o, ok)
	}
	byID["msg_1"] = msg
	if o, ok := sess.original(byID, msg); !ok || o != msg {
		t.Errorf("an appended message in the log: %v %v", o, ok)
	}
}
