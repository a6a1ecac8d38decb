package app

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// streamDrain ends every open server stream when shutdown begins: the
// status watches end through the hub, but health's Watch and reflection
// streams would otherwise hold the HTTP drain open until the shutdown
// timeout (and health is served without credentials). Each stream's context
// is cancelled, its handler returns, and the caller gets a clean
// UNAVAILABLE ("reconnect") instead of a cut connection.
type streamDrain struct {
	once sync.Once
	ch   chan struct{}
}

func newStreamDrain() *streamDrain { return &streamDrain{ch: make(chan struct{})} }

// start ends the open streams and every stream opened later.
func (d *streamDrain) start() { d.once.Do(func() { close(d.ch) }) }

func (d *streamDrain) interceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	go func() {
		select {
		case <-d.ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := handler(srv, drainedStream{ServerStream: ss, ctx: ctx})
	select {
	case <-d.ch:
		// Ended by the drain (the caller did not go away, and the handler
		// gave up because of the cancelled context, not with its own
		// answer, such as the status watch's "resume from_version").
		if ss.Context().Err() == nil && (err == nil || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled) {
			return status.Error(codes.Unavailable, "the server is shutting down; reconnect")
		}
	default:
	}
	return err
}

type drainedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s drainedStream) Context() context.Context { return s.ctx }
