package app

import (
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestHostileWatchRecreate: a tenant-wide watch sees a session deleted and
// re-created under the same id (versions start again at 1): the new
// incarnation's changes are sent, not taken for old versions and dropped.
// On both stores.
func TestHostileWatchRecreate(t *testing.T) {
	onBothStoresEnv(t, map[string]string{}, func(t *testing.T, env map[string]string) {
		client := contextdv1.NewContextServiceClient(startServer(t, env))
		ctx := t.Context()
		// A session in the snapshot tells when the watch has subscribed.
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "other", Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
		stream, err := client.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		of := func(id string, ev contextdv1.StatusEvent) func(*contextdv1.ContextStatus) bool {
			return func(st *contextdv1.ContextStatus) bool { return st.GetSessionId() == id && st.GetEvent() == ev }
		}
		recvUntil(t, stream, of("other", contextdv1.StatusEvent_STATUS_EVENT_SNAPSHOT))
		for round := 0; round < 2; round++ {
			if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "w", Model: "gpt-4o"}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3-round; i++ {
				if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "w", Messages: []*contextdv1.Message{user("hi")}}); err != nil {
					t.Fatal(err)
				}
			}
			// A change of the session (the create and the appends may
			// come coalesced, as one status of the newest version).
			st := recvUntil(t, stream, func(st *contextdv1.ContextStatus) bool {
				return of("w", contextdv1.StatusEvent_STATUS_EVENT_APPENDED)(st) || of("w", contextdv1.StatusEvent_STATUS_EVENT_UPDATED)(st)
			})
			if round == 1 && st.GetVersion() > 3 {
				t.Fatalf("the re-created session's status came as version %d", st.GetVersion())
			}
			if round == 0 {
				if _, err := client.DeleteSession(ctx, &contextdv1.DeleteSessionRequest{SessionId: "w"}); err != nil {
					t.Fatal(err)
				}
				recvUntil(t, stream, of("w", contextdv1.StatusEvent_STATUS_EVENT_DELETED))
			}
		}
		if s, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "w"}); err != nil || s.GetSession().GetVersion() != 3 {
			t.Fatalf("re-created session: %v, %v", s, err)
		}
	})
}
