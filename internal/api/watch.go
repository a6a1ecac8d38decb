package api

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/watch"
)

var eventToProto = map[watch.Event]contextdv1.StatusEvent{
	watch.EventAppended:  contextdv1.StatusEvent_STATUS_EVENT_APPENDED,
	watch.EventCompacted: contextdv1.StatusEvent_STATUS_EVENT_COMPACTED,
	watch.EventReverted:  contextdv1.StatusEvent_STATUS_EVENT_REVERTED,
	watch.EventWarning:   contextdv1.StatusEvent_STATUS_EVENT_WARNING,
	watch.EventDeleted:   contextdv1.StatusEvent_STATUS_EVENT_DELETED,
	watch.EventUpdated:   contextdv1.StatusEvent_STATUS_EVENT_UPDATED,
	watch.EventResync:    contextdv1.StatusEvent_STATUS_EVENT_SNAPSHOT,
}

const defaultHeartbeat = 15 * time.Second

// snapshotPage is how many sessions a tenant-wide watch reads at once for its
// initial snapshot: it sends each page before reading the next, so
// subscribing holds one page (and its statuses), never the whole tenant.
// The rows are ListSessions' summaries (no system prompt, tools or
// compaction items), so a page's memory does not grow with what the
// sessions hold.
// What the stream keeps is the last version sent per session (an id and a
// number), bounded by CONTEXTD_MAX_SESSIONS_PER_TENANT.
const snapshotPage = 500

// errShuttingDown ends a watch when the server stops.
var errShuttingDown = status.Error(codes.Unavailable, "server shutting down; watch again (any replica) with from_version set to the last version you saw")

// WatchContextStatus implements contextd.v1.ContextService. It subscribes
// before it reads the snapshot, so no change between the two is missed, and
// sends each session's versions in increasing order only.
func (s *ContextService) WatchContextStatus(req *contextdv1.WatchContextStatusRequest, stream contextdv1.ContextService_WatchContextStatusServer) error {
	ctx := stream.Context()
	tenant, id := tenantOf(ctx), req.GetSessionId()
	if s.hub == nil {
		return status.Error(codes.Unimplemented, "watching is not enabled on this server")
	}
	sub, err := s.hub.Subscribe(tenant, id)
	switch {
	case errors.Is(err, watch.ErrTooManySubscribers):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, watch.ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	case err != nil:
		return toStatus(ctx, s.log, err)
	}
	defer sub.Close()

	sent := map[string]int64{}
	send := func(st engine.Status, ev contextdv1.StatusEvent) error {
		sent[st.SessionID] = max(sent[st.SessionID], st.Version)
		return stream.Send(&contextdv1.WatchContextStatusResponse{Status: statusToProto(st, ev)})
	}
	// Snapshot.
	if id != "" {
		st, err := s.engine.SessionStatus(ctx, tenant, id)
		if err != nil {
			return toStatus(ctx, s.log, err)
		}
		sent[id] = req.GetFromVersion()
		if st.Version > req.GetFromVersion() {
			if err := send(st, contextdv1.StatusEvent_STATUS_EVENT_SNAPSHOT); err != nil {
				return err
			}
		}
	} else {
		for page := (engine.Page{Size: snapshotPage}); ; {
			views, next, err := s.engine.ListSessions(ctx, tenant, nil, page)
			if err != nil {
				return toStatus(ctx, s.log, err)
			}
			for _, v := range views {
				if err := send(v.Status(time.Now().UTC()), contextdv1.StatusEvent_STATUS_EVENT_SNAPSHOT); err != nil {
					return err
				}
			}
			if next == "" {
				break
			}
			page.Token = next
		}
	}

	every := defaultHeartbeat
	if n := req.GetHeartbeatSeconds(); n > 0 {
		every = time.Duration(n) * time.Second
	}
	heartbeat := time.NewTicker(every)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			select {
			case <-sub.Done():
				// The server stopping cancels the stream just after it
				// closes the hub: the client still gets the hint.
				return errShuttingDown
			default:
				return nil
			}
		case <-sub.Done():
			return errShuttingDown
		case <-heartbeat.C:
			hb := &contextdv1.ContextStatus{Event: contextdv1.StatusEvent_STATUS_EVENT_HEARTBEAT, Time: timestamppb.Now()}
			if err := stream.Send(&contextdv1.WatchContextStatusResponse{Status: hb}); err != nil {
				return err
			}
		case <-sub.C():
			for _, u := range sub.Drain() {
				if u.Event != watch.EventDeleted && u.Version <= sent[u.SessionID] {
					continue
				}
				st, _ := u.Payload.(engine.Status)
				st.SessionID, st.Version = u.SessionID, max(st.Version, u.Version)
				if err := send(st, eventToProto[u.Event]); err != nil {
					return err
				}
				if u.Event == watch.EventDeleted {
					if id != "" {
						return nil // the watched session is gone
					}
					// A session re-created with this id starts again at
					// version 1: its versions must not be compared with
					// the deleted one's.
					delete(sent, u.SessionID)
				}
			}
		}
	}
}

// ResolveStatus builds the update a change publishes: the session's current
// status, read once for every subscriber. A deleted session (or one that is
// gone by the time it is read) publishes a deletion.
func ResolveStatus(eng *engine.Engine) watch.ResolveFunc {
	return func(ctx context.Context, c watch.Change) (watch.Update, bool, error) {
		deleted := watch.Update{Tenant: c.Tenant, SessionID: c.SessionID, Version: c.Version, Event: watch.EventDeleted,
			Payload: engine.Status{SessionID: c.SessionID, Time: time.Now().UTC()}}
		if c.Event == watch.EventDeleted {
			return deleted, true, nil
		}
		st, err := eng.SessionStatus(ctx, c.Tenant, c.SessionID)
		if errors.Is(err, store.ErrNotFound) {
			return deleted, true, nil
		}
		if err != nil {
			return watch.Update{}, false, err
		}
		// The status may already be newer than the change (its own change
		// is on the way): it is labelled with the change that asked for it.
		return watch.Update{Tenant: c.Tenant, SessionID: c.SessionID, Version: st.Version, Event: c.Event, Payload: st}, true, nil
	}
}
