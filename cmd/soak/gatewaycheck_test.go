package main

import (
	"testing"
	"time"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestGatewayReplyUnrecordedAtKill: a conversation's log may lack the
// reply of its last acknowledged turn only when a replica was killed
// within killGap after that turn's acknowledgment (the gateway records
// the reply from just before the answer's last byte); then it is counted,
// not lost. A missing reply with no kill near it, one followed by later
// acknowledged turns, or a kill before the acknowledgment is lost.
func TestGatewayReplyUnrecordedAtKill(t *testing.T) {
	at := time.Date(2026, 11, 27, 15, 0, 0, 0, time.UTC)
	u1, a1, u2, a2 := turn{"user", "u1"}, turn{"assistant", "ok"}, turn{"user", "u2"}, turn{"assistant", "ok2"}
	cases := []struct {
		name    string
		acked   []turn
		log     []turn
		kill    time.Duration // after the acknowledgment; 0: no kill
		readLag time.Duration // a checkpoint's read after the acknowledgment; 0: the final check
		lost    int
		excused int64
	}{
		{"recorded", []turn{u1, a1}, []turn{u1, a1}, 0, 0, 0, 0},
		{"last reply missing, kill 1 s after", []turn{u1, a1}, []turn{u1}, time.Second, 0, 0, 1},
		{"last reply missing, no kill", []turn{u1, a1}, []turn{u1}, 0, 0, 1, 0},
		{"last reply missing, kill 3 s after", []turn{u1, a1}, []turn{u1}, 3 * time.Second, 0, 1, 0},
		{"last reply missing, kill 1 s before", []turn{u1, a1}, []turn{u1}, -time.Second, 0, 1, 0},
		{"a reply before later turns missing", []turn{u1, a1, u2, a2}, []turn{u1, u2}, time.Second, 0, 1, 0},
		{"two messages missing", []turn{u1, a1, u2, a2}, []turn{u1, a1}, time.Second, 0, 1, 0},
		{"checkpoint, recording in flight", []turn{u1, a1}, []turn{u1}, 0, 50 * time.Millisecond, 0, 0},
		{"checkpoint, long after", []turn{u1, a1}, []turn{u1}, 0, 10 * time.Second, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &soak{rep: newReport()}
			if tc.kill != 0 {
				s.kills = []time.Time{at.Add(tc.kill)}
			}
			var log []*contextdv1.Message
			for _, m := range tc.log {
				role := contextdv1.Role_ROLE_USER
				if m.role == "assistant" {
					role = contextdv1.Role_ROLE_ASSISTANT
				}
				log = append(log, &contextdv1.Message{Role: role, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: m.text}}}}})
			}
			c := conversation{door: "/v1/responses", session: "gw-test", acked: tc.acked, ackedAt: at}
			final, readAt := tc.readLag == 0, time.Time{}
			if !final {
				readAt = at.Add(tc.readLag)
			}
			s.compareGateway(c, log, final, readAt)
			if got := s.rep.counts()[lost]; got != tc.lost {
				t.Errorf("lost %d, want %d (%v)", got, tc.lost, s.rep.problems[lost])
			}
			if got := s.unrecordedAtKill.Load(); got != tc.excused {
				t.Errorf("unrecorded at a kill %d, want %d", got, tc.excused)
			}
		})
	}
}
