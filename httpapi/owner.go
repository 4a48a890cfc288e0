package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/narad-io/storage/cluster"
)

// OwnerLocator says where a cluster serves a partition (the node's
// replica of the assignment and of the members); nil on a node alone.
type OwnerLocator interface {
	Locate(topic string, p int) (cluster.Location, bool)
	// Settle brings the node's replica up to etcd and waits, until ctx
	// ends, for the partition to have an owner.
	Settle(ctx context.Context, topic string, p int) bool
	// Serving reports whether the node serves its partitions at all: it
	// is registered and renewed its lease within its fence horizon.
	Serving() bool
	// Registration numbers the node's registration: a call served under
	// one and the same registration throughout sees it unchanged.
	Registration() uint64
}

// settleWait bounds how long a call waits for this node's replica to
// catch up with etcd: one for a partition without an owner (a topic just
// made through another node) waits for the assigner too, one for a move
// this node does not know (asked through another node) for its record.
const settleWait = 2 * time.Second

// ownerBody is a 421's owner: the node that serves the partition.
type ownerBody struct {
	NodeID string `json:"node_id"`
	Addr   string `json:"addr"`
}

// owned runs h for a partition this node owns, or for a topic-wide call
// (which covers the partitions this node owns); on a cluster's node, a
// request for a partition another node owns is answered at once, before
// its body is read: 421 not_owner with the owner's address while the
// owner is live, 503 while the owner is not or the partition has none
// yet. A partition the node's replica does not know an owner of is
// settled first (OwnerLocator.Settle): a topic just made through another
// node is found, and its partitions' owners waited for, briefly (so a
// call for a topic that does not exist costs an etcd read, and up to
// settleWait while etcd is away). A topic or partition that does not
// exist is h's to answer, and an assignment that changes after this
// check is caught by the node (ErrNotAssigned, answered the same way). A
// node that is not serving (fenced: not registered, or its lease not
// renewed within its fence horizon) answers 503 fenced for the
// partitions it owns and for topic-wide calls, once the owner check
// passed.
func (a *Handler) owned(h http.HandlerFunc) http.HandlerFunc {
	if a.opts.Owners == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		topic := r.PathValue("topic")
		if p, ok := partitionParam(r); ok {
			if _, owned := a.opts.Owners.Locate(topic, p); !owned {
				// Unknown here, or without an owner: the topic may be just
				// made through another node.
				ctx, cancel := context.WithTimeout(r.Context(), settleWait)
				a.opts.Owners.Settle(ctx, topic, p)
				cancel()
			}
			rec, exists, err := a.ms.Topic(r.Context(), topic)
			if err == nil && exists && p < rec.Partitions {
				if mine, err := a.ms.Assigned(r.Context(), topic, p); err == nil && !mine {
					a.writeNotOwner(w, topic, p)
					return
				}
			}
		}
		if !a.opts.Owners.Serving() { // after the owner check: another node's partition is still sent on
			writeFenced(w, "")
			return
		}
		h(w, r)
	}
}

// writeNotOwner answers a request for a partition this node does not
// serve with where it is served.
func (a *Handler) writeNotOwner(w http.ResponseWriter, topic string, p int) {
	where := fmt.Sprintf("partition %d of topic %q", p, topic)
	var loc cluster.Location
	ok := false
	if a.opts.Owners != nil {
		loc, ok = a.opts.Owners.Locate(topic, p)
	}
	switch {
	case ok && loc.Moving:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "moving", where+" is moving to another node; no node serves it until the move completes (seconds); retry")
	case !ok:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unassigned", where+" has no owner yet; the cluster's assigner gives it one when a node is live; retry")
	case loc.Addr == "":
		w.Header().Set("Retry-After", strconv.Itoa(ownerDownRetrySeconds))
		writeErrorBody(w, http.StatusServiceUnavailable, "owner_unavailable",
			fmt.Sprintf("%s is node %q's, which is not live; only it holds the partition's records; retry once it is back", where, loc.NodeID),
			func(b *errorBody) { b.Owner = &ownerBody{NodeID: loc.NodeID} })
	default:
		writeErrorBody(w, http.StatusMisdirectedRequest, "not_owner", fmt.Sprintf("%s is served by node %q at %s", where, loc.NodeID, loc.Addr),
			func(b *errorBody) { b.Owner = &ownerBody{NodeID: loc.NodeID, Addr: loc.Addr} })
	}
}

// writeFenced answers a call this node does not serve because it is
// fenced; what says more (a produce committed but not acknowledged).
func writeFenced(w http.ResponseWriter, what string) {
	w.Header().Set("Retry-After", strconv.Itoa(ownerDownRetrySeconds))
	writeError(w, http.StatusServiceUnavailable, "fenced",
		"this node serves no partition now: it is not registered in the cluster, or has not renewed its lease with etcd within its fence horizon (--fence-after), so another node may have been given its partitions"+what+"; retry")
}

// ownerDownRetrySeconds is the Retry-After of owner_unavailable: a
// restarted node is back within seconds.
const ownerDownRetrySeconds = 5
