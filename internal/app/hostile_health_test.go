package app

import (
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestHostileHealthAndReflectionStreams: health Watch and reflection
// streams need no credentials; opening them in a loop is held to the rate
// limit, per caller address (it was not limited at all), while health
// Check (what probes use) is not. On both stores, with auth on.
func TestHostileHealthAndReflectionStreams(t *testing.T) {
	onBothStoresEnv(t, map[string]string{"CONTEXTD_API_KEYS": "acme:k-acme", "CONTEXTD_RATE_LIMIT_RPS": "1", "CONTEXTD_RATE_LIMIT_BURST": "3"}, func(t *testing.T, env map[string]string) {
		conn := startServer(t, env)
		ctx := t.Context()
		client := contextdv1.NewContextServiceClient(conn)
		if _, err := client.CreateSession(as(ctx, "k-acme"), &contextdv1.CreateSessionRequest{Id: "s", Model: "gpt-4o"}); err != nil {
			t.Fatal(err)
		}
		health := healthpb.NewHealthClient(conn)
		refl := reflectionpb.NewServerReflectionClient(conn)
		limited := 0
		for range 10 {
			w, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = w.Recv()
			}
			if status.Code(err) == codes.ResourceExhausted {
				limited++
			} else if err != nil {
				t.Fatalf("health Watch: %v", err)
			}
			r, err := refl.ServerReflectionInfo(ctx)
			if err == nil {
				err = r.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
			}
			if err == nil || errors.Is(err, io.EOF) {
				// Send answers io.EOF when the server already ended the
				// stream (refused it): Recv gives the status.
				_, err = r.Recv()
			}
			if status.Code(err) == codes.ResourceExhausted {
				limited++
			} else if err != nil {
				t.Fatalf("reflection: %v", err)
			}
		}
		if limited < 10 { // 20 opened, at most 3 + the seconds elapsed allowed
			t.Errorf("only %d of 20 streams opened at a burst of 3 and 1 a second were limited", limited)
		}
		for range 10 {
			if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatalf("health Check is limited: %v", err)
			}
		}
		if s, err := client.GetSession(as(ctx, "k-acme"), &contextdv1.GetSessionRequest{SessionId: "s"}); err != nil || s.GetSession().GetVersion() != 1 {
			t.Fatalf("session not intact: %v, %v", s, err)
		}
	})
}
