package gateway

import "net/http"

// Forward: the fourth stage of a door's request (exchange.go). The
// prepared body goes upstream with the client's headers (roundtrip.go's
// send). Without the expand tool the provider's response comes back
// unread, for relay to pass on as it arrives; with it, the expand loop
// (expandloop.go) runs round trips, each read whole, until an answer the
// client may see.

// forward is the stage. From here until the answer is recorded the
// session is busy (inflight.go).
func (x *exchange) forward() answer {
	if x.c.passthrough == "" {
		x.hold = x.g.holdCall(x.r.Context(), x.tenant, x.res, x.c)
	}
	if x.expanding {
		return x.expand()
	}
	resp, err := x.g.send(x.r.Context(), x.r, x.d, x.body)
	if err != nil {
		return answer{err: refused(http.StatusBadGateway, errUpstream, "the provider could not be reached: "+upstreamReason(err))}
	}
	return answer{resp: resp}
}
