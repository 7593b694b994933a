package router

import (
	"fmt"

	"github.com/spindle-rpc/spindle/internal/wire"
	"go.uber.org/zap"
)

// Route control operations, carried at HandleRoute.
const (
	routeGrant uint8 = 1 // down: ids will be connected below dst
	routeAdd   uint8 = 2 // up: ids are now connected
	routeDel   uint8 = 3 // up: ids are gone
)

type routeMsg struct {
	Op     uint8    `msgpack:"op"`
	IDs    []uint32 `msgpack:"ids"`
	Names  []string `msgpack:"names,omitempty"`
	Reason string   `msgpack:"reason,omitempty"`
}

func encodeRouteMsg(rm routeMsg) ([]byte, error) { return wire.Marshal(&rm) }

// announce sends a route announcement toward the controller.
func (r *Router) announce(op uint8, ids []uint32, reason string) {
	data, err := encodeRouteMsg(routeMsg{Op: op, IDs: ids, Reason: reason})
	if err == nil {
		err = r.Send(&Message{Dst: ControllerID, Handle: HandleRoute, Data: data})
	}
	if err != nil {
		r.log.Debug("route announcement not sent", zap.Error(err))
	}
}

// routeControl processes a route message passing through (or arriving at)
// this router. It reports whether the message may continue.
func (r *Router) routeControl(m *Message, from *Link) bool {
	var rm routeMsg
	if err := wire.Unmarshal(m.Data, &rm); err != nil {
		r.refuse(m, from, fmt.Sprintf("bad route message: %v", err))
		return false
	}
	switch rm.Op {
	case routeGrant:
		if !from.toParent {
			r.refuse(m, from, "route grants come from the parent only")
			return false
		}
		if m.Dst == r.id {
			return false // our own connect call will add the route
		}
		r.mu.Lock()
		next := r.routes[m.Dst]
		if next != nil {
			for i, id := range rm.IDs {
				if id == r.id {
					continue
				}
				r.routes[id] = next
				if i < len(rm.Names) {
					r.names[id] = rm.Names[i]
				}
			}
		}
		r.mu.Unlock()
		return next != nil
	case routeAdd, routeDel:
		if from.toParent {
			r.refuse(m, from, "route announcements come from children only")
			return false
		}
		// All or nothing: a refused announcement must not change routing.
		r.mu.Lock()
		for _, id := range rm.IDs {
			if r.routes[id] != from {
				r.mu.Unlock()
				r.refuse(m, from, fmt.Sprintf("route announcement names ids %v not granted to this link", rm.IDs))
				return false
			}
		}
		if rm.Op == routeDel {
			for _, id := range rm.IDs {
				delete(r.routes, id)
			}
		}
		r.mu.Unlock()
		if rm.Op == routeDel {
			r.lost(rm.IDs, rm.Reason)
		}
		return true
	default:
		r.refuse(m, from, fmt.Sprintf("unknown route op %d", rm.Op))
		return false
	}
}
